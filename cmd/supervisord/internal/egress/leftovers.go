package egress

import (
	"context"
	"errors"
)

// Leftovers is what secretd and egressd hold under the client's owner
// id: the invocations with unconsumed leases, and those with a bundle.
// A map is nil when its daemon did not answer (or is not configured).
type Leftovers struct {
	Leases  map[string]int  // invocation → unconsumed leases
	Bundles map[string]bool // invocation → the bundle holds credentials
}

// Invocations lists every invocation in l, leases or bundle.
func (l Leftovers) Invocations() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]bool{l.Bundles, leaseSet(l.Leases)} {
		for inv := range m {
			if !seen[inv] {
				seen[inv] = true
				out = append(out, inv)
			}
		}
	}
	return out
}

func leaseSet(m map[string]int) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// errNoOwner refuses to list leftovers without an owner id: the lists
// would name every stager's leases and bundles.
var errNoOwner = errors.New("egress: no owner id configured")

// Leftovers asks secretd (lease.list) and egressd (bundle.list) for what
// they hold under the client's owner id. It returns what it learnt and
// the first error (a daemon that did not answer): the caller tries
// again later for that daemon.
func (c *Client) Leftovers(ctx context.Context) (Leftovers, error) {
	var l Leftovers
	if c.cfg.Owner == "" {
		return l, errNoOwner
	}
	var first error
	if c.sd != nil {
		if r, err := c.sd.LeaseListOwned(ctx, c.cfg.Owner, ""); err != nil {
			first = err
		} else {
			l.Leases = map[string]int{}
			for _, m := range r.Leases {
				if m.Owner == c.cfg.Owner { // a secretd that ignored the filter is not trusted with our release
					l.Leases[m.Invocation]++
				}
			}
		}
	}
	if c.eg != nil {
		if r, err := c.eg.BundleList(ctx, c.cfg.Owner, ""); err != nil && first == nil {
			first = err
		} else if err == nil {
			l.Bundles = map[string]bool{}
			for _, b := range r.Bundles {
				if b.Owner == c.cfg.Owner {
					l.Bundles[b.Invocation] = b.Credentialed
				}
			}
		}
	}
	return l, first
}

// ReleaseLeftover revokes invocation's leases (when leases) and drops its
// bundle (when bundle), each limited to the client's owner id: another
// owner's lease or bundle of the same invocation is never touched. It
// returns how many leases were revoked, whether a bundle was dropped, and
// the first error.
func (c *Client) ReleaseLeftover(ctx context.Context, invocation string, leases, bundle bool) (int, bool, error) {
	if c.cfg.Owner == "" {
		return 0, false, errNoOwner
	}
	var first error
	dropped := false
	if bundle {
		var err error
		if dropped, err = c.dropOwned(ctx, invocation); err != nil {
			first = err
		}
	}
	n := 0
	if leases {
		var err error
		if n, err = c.revokeOwned(ctx, invocation); err != nil && first == nil {
			first = err
		}
	}
	return n, dropped, first
}
