package bundle

import (
	"regexp"

	"hostkit.dev/cmd/egressd/internal/policy"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
)

// placeholderAnyRE matches a placeholder (docs/design.md, "Identifiers and
// schemas"): "hkp_" and 32 lowercase unpadded base32 characters.
var placeholderAnyRE = regexp.MustCompile(`hkp_[a-z2-7]{32}`)

// FindPlaceholders returns every substring of s shaped like a placeholder,
// known or not, in order.
func FindPlaceholders(s []byte) []string {
	var out []string
	for _, m := range placeholderAnyRE.FindAll(s, -1) {
		out = append(out, string(m))
	}
	return out
}

// PlaceholderOwner returns the invocation whose bundle holds placeholder
// p, and whether any bundle holds it.
func (r *Registry) PlaceholderOwner(p string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	inv, ok := r.places[p]
	return inv, ok
}

// AddBytes adds n outbound bytes (a tunnel's, which is counted as one
// request when it opens) to the invocation's network_egress_bytes.
func (b *Bundle) AddBytes(n uint64) { b.egressBytes.Add(n) }

// AddRequest counts one request (or tunnel) sent without bytes yet.
func (b *Bundle) AddRequest() { b.requests.Add(1) }

// AllowsOrigin reports whether the invocation may reach origin o with
// some method: a credential destination or a policy rule.
func (b *Bundle) AllowsOrigin(o netguard.Origin) bool {
	for _, c := range b.creds {
		if c.Destination == o {
			return true
		}
	}
	return b.policy.AllowsOrigin(o)
}

// Anonymous is the invocation name of the anonymous bundle; it is not a
// valid invocation id, so no registration can take it.
const Anonymous = "(anonymous)"

// NewAnonymous returns the bundle of anonymous proxy use (no proxy token),
// which holds no credentials and allows what pol allows. It is not in any
// registry. Errors: bundle.invalid.
func NewAnonymous(pol egressdapi.Policy) (*Bundle, error) {
	p, err := policy.Compile(pol)
	if err != nil {
		return nil, err
	}
	return &Bundle{Invocation: Anonymous, policy: p}, nil
}
