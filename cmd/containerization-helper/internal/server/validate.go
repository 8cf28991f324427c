package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"

	"hostkit.dev/cmd/containerization-helper/internal/provider"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/wire"
)

// newContainerID returns "hk-" + 16 lowercase hex digits from crypto/rand.
// Ids are always the helper's own: a caller-supplied name never becomes
// one, so a name can never point at another container.
func newContainerID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", wire.Wrap(wire.CodeInternal, "no randomness for a container id", err)
	}
	return helperapi.ContainerIDPrefix + hex.EncodeToString(b[:]), nil
}

// validID reports whether id has the shape of a helper-generated id. Any
// other string (a traversal such as "../evil", a foreign container's id)
// is refused before a path or a runtime command is built from it.
func validID(id string) bool {
	h, ok := strings.CutPrefix(id, helperapi.ContainerIDPrefix)
	return ok && len(h) == 16 && isLowerHex(h)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// canonicalUUID reports whether s is a UUID in canonical lowercase
// 8-4-4-4-12 form (docs/design.md, "Identifiers and schemas").
func canonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isLowerHex(s[i : i+1]) {
				return false
			}
		}
	}
	return true
}

// validDigest reports whether d is "sha256:" + 64 lowercase hex.
func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	return ok && len(h) == 64 && isLowerHex(h)
}

func validKind(k string) bool { return slices.Contains(helperapi.MutationKinds, k) }

func invalid(format string, args ...any) error {
	return wire.Errorf(wire.CodeRequestInvalid, format, args...)
}

// checkContext checks a mutation context against this helper: the
// project id, the instance id's form, a fence of at least 1, and the
// capability digest against the current snapshot (capability.mismatch).
// The fence itself is checked against the store by the caller.
func (s *Server) checkContext(rt *active, c helperapi.Context) error {
	if c.ProjectID != s.cfg.Store.ProjectID() {
		return wire.Errorf(helperapi.CodeProjectMismatch, "the request is for another project")
	}
	if !canonicalUUID(c.InstanceID) {
		return invalid("context.instance_id must be a canonical lowercase UUID")
	}
	if c.Fence == 0 {
		return invalid("context.fence must be at least 1")
	}
	if !validDigest(c.CapabilityDigest) {
		return invalid("context.capability_digest must be sha256:<64 hex>")
	}
	if c.CapabilityDigest != rt.snap.Digest() {
		return &wire.Error{Code: helperapi.CodeCapabilityMismatch, Msg: "the capability snapshot changed since the request was planned; negotiate and plan again", Retry: wire.RetryNever}
	}
	return nil
}

// mapErr turns an error from the provider into one a peer may get: codes
// of lib/procexec are local (docs/protocol.md) and become
// provider.failed, keeping procexec's redacted message; an op cancelled
// by op.cancel keeps its cause so the wrapper answers op.cancelled.
func (s *Server) mapErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	we := wire.AsError(err)
	if strings.HasPrefix(we.Code, "procexec.") {
		if ctx.Err() != nil {
			// Cancelled or past its deadline: as internal, the rpc layer
			// answers request.deadline_exceeded and the cancel wrapper
			// op.cancelled.
			return &wire.Error{Code: wire.CodeInternal, Msg: "the op ended before the runtime command did", Err: err}
		}
		return &wire.Error{Code: provider.CodeFailed, Msg: "the runtime command failed: " + we.Msg, Retry: wire.RetryAfterObserve, Err: err}
	}
	return err
}

func codeOf(err error) string { return wire.CodeOf(err) }
