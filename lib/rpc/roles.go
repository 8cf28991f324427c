package rpc

import (
	"fmt"
	"os/user"
	"slices"
	"strconv"
)

// Role names a set of peers allowed to call some ops (docs/design.md,
// "Peers and roles": admin, stager, consumer, client).
type Role string

// Roles maps each role to the UIDs that hold it, resolved once at start.
type Roles map[Role][]uint32

// Allows reports whether uid holds any of roles.
func (r Roles) Allows(uid uint32, roles []Role) bool {
	for _, role := range roles {
		if slices.Contains(r[role], uid) {
			return true
		}
	}
	return false
}

// Any reports whether uid holds at least one role.
func (r Roles) Any(uid uint32) bool {
	for _, uids := range r {
		if slices.Contains(uids, uid) {
			return true
		}
	}
	return false
}

// All lists every role in r.
func (r Roles) All() []Role {
	out := make([]Role, 0, len(r))
	for role := range r {
		out = append(out, role)
	}
	slices.Sort(out)
	return out
}

// ResolveUsers turns user names or numeric UIDs into UIDs (user.Lookup, no
// NSS cache). An empty list resolves to the current process's effective
// UID: the same-user deployment, where the daemon's own user holds the role.
func ResolveUsers(names []string, self uint32) ([]uint32, error) {
	if len(names) == 0 {
		return []uint32{self}, nil
	}
	out := make([]uint32, 0, len(names))
	for _, n := range names {
		if id, err := strconv.ParseUint(n, 10, 32); err == nil {
			out = append(out, uint32(id))
			continue
		}
		u, err := user.Lookup(n)
		if err != nil {
			return nil, fmt.Errorf("rpc.ResolveUsers: user %q: %w", n, err)
		}
		id, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("rpc.ResolveUsers: user %q has uid %q: %w", n, u.Uid, err)
		}
		out = append(out, uint32(id))
	}
	return out, nil
}
