package bundle

import "regexp"

// placeholderAnyRE matches a placeholder (DESIGN.md, "Placeholder"): "hkp_"
// and 32 lowercase unpadded base32 characters.
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
