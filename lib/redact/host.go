package redact

import (
	"encoding/base32"
	"unsafe"
)

// ContainsInHost reports whether host — a host name or an authority
// (host[:port]) as a client wrote it or as it was canonicalized —
// holds a registered value, in every form ContainsDecoded finds, and in
// the forms a host name forces, since a host name is lowercased on its
// way (DNS, Host, TLS server name) and is cut into labels:
//
//   - every form Contains matches, and base32 (RFC 4648, standard and
//     extended-hex alphabets, without padding, at each of the five byte
//     alignments inside a longer encoding when at least
//     minStableBase64 characters depend on the value alone), matched
//     without regard to ASCII case (so base64 and base64url are matched
//     on lowercased text);
//   - a value split over several labels: the host is read with its dots
//     removed (the patterns too), so "abc.def.example.com" holds "abcdef";
//   - separated hex and invisible characters (within their bounds), on
//     the lowercased host without dots, and up to MaxDecodeLevels levels
//     of percent-encoding (a Host field may carry escapes).
//
// Forms longer than the host cannot be in it, so the cost is a few
// microseconds for a name.
func (s *Scrubber) ContainsInHost(host string) bool {
	if s.load() == nil {
		return false
	}
	// Read only (nothing here writes to its input): no copy of host.
	v := unsafe.Slice(unsafe.StringData(host), len(host))
	if s.Contains(v) || s.ContainsDecoded(v) {
		return true
	}
	hm := s.hostMatcher()
	if hm == nil {
		return false
	}
	var buf [256]byte // a name is at most 253 bytes: no allocation
	for level := 0; ; level++ {
		f := foldHost(buf[:0], v)
		if len(f) >= hm.minLen && (hm.contains(f) || hm.spaced(f)) {
			return true
		}
		if level == MaxDecodeLevels || indexIn(v, &escapeStart) < 0 {
			return false
		}
		d := unescape(v)
		if len(d) == len(v) {
			return false
		}
		v = d
	}
}

// foldHost appends b to dst with ASCII letters lowered and dots removed.
func foldHost(dst, b []byte) []byte {
	for _, c := range b {
		if c != '.' {
			dst = append(dst, lower(c))
		}
	}
	return dst
}

// hostMatcher returns the matcher of host forms for the current
// registrations, building it on first use after a change; nil when
// nothing is registered (or nothing survives folding).
func (s *Scrubber) hostMatcher() *matcher {
	m := s.load()
	if m == nil {
		return nil
	}
	if h := s.host.Load(); h != nil && h.gen == m.gen {
		return h
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m = s.m.Load() // the registrations may have changed meanwhile
	if m == nil {
		return nil
	}
	if h := s.host.Load(); h != nil && h.gen == m.gen {
		return h
	}
	var all []string
	for _, pats := range s.regs {
		// pats[0] is the raw value (encodedForms lists it first).
		forms := append(append([]string(nil), pats...), base32Forms([]byte(pats[0]))...)
		for _, p := range forms {
			if f := string(foldHost(nil, []byte(p))); len(f) >= MinValueLen {
				all = append(all, f)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	h := newMatcher(all, m.gen)
	s.host.Store(h)
	return h
}

// base32Forms returns v in base32 without padding, in the standard and
// extended-hex alphabets, whole and, inside a longer encoding, the part
// that depends on v alone at each byte offset k (mod 5) when it is at
// least minStableBase64 characters long.
func base32Forms(v []byte) []string {
	var forms []string
	for _, enc := range []*base32.Encoding{base32.StdEncoding.WithPadding(base32.NoPadding),
		base32.HexEncoding.WithPadding(base32.NoPadding)} {
		forms = append(forms, enc.EncodeToString(v))
		for k := range 5 {
			buf := make([]byte, k+len(v))
			copy(buf[k:], v)
			e := enc.EncodeToString(buf)
			start, end := (8*k+4)/5, 8*(k+len(v))/5
			if end-start >= minStableBase64 {
				forms = append(forms, e[start:end])
			}
		}
	}
	return forms
}
