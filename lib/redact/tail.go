package redact

import "unsafe"

// MinTailPrefix is the shortest proper prefix of a form of a held value,
// in bytes, that ScrubBody and Stream.Close replace at the very end of a
// body. A body that ends with most of a value leaks most of it (a
// destination that truncates an echo by one character hands out all but
// that character, guessed in a few dozen tries); a shorter tail is left
// as it is, since nearly every last byte begins some form of some value
// and replacing it would mangle ordinary answers.
const MinTailPrefix = 4

// ScrubBody is ScrubBytes for a whole body: it also replaces with
// Redacted the longest suffix of the result that is a proper prefix of
// a form ScrubBytes replaces, when that suffix is at least MinTailPrefix
// bytes. A body in which ContainsDecoded finds an echo is returned as
// ScrubBytes returns it (the caller refuses it whole). It is what a
// Stream hands out for the same body, piece by piece.
func (s *Scrubber) ScrubBody(b []byte) []byte {
	out := s.ScrubBytes(b)
	m := s.load()
	if m == nil || s.ContainsDecoded(out) {
		return out
	}
	k := m.tailPrefix(out)
	if k == 0 {
		return out
	}
	if len(out) > 0 && len(b) > 0 && &out[0] == &b[0] {
		out = append([]byte(nil), out...) // never write into the caller's b
	}
	return append(out[:len(out)-k], Redacted...)
}

// ScrubField is Scrub for a whole value that nothing follows, such as a
// header or trailer field's: it also replaces a final proper prefix of
// a form, as ScrubBody does. It does not look for decoded echoes; the
// caller asks ContainsDecoded of the result.
func (s *Scrubber) ScrubField(v string) string {
	out := s.Scrub(v)
	m := s.load()
	if m == nil {
		return out
	}
	if k := m.tailPrefix(unsafe.Slice(unsafe.StringData(out), len(out))); k > 0 {
		return out[:len(out)-k] + Redacted
	}
	return out
}

// tailPrefix returns the length of the longest suffix of b that is a
// proper prefix of one of m's patterns (the exact forms), or 0 when that
// is shorter than MinTailPrefix. It reads at most the last maxLen-1
// bytes of b: no longer suffix can be a proper prefix.
func (m *matcher) tailPrefix(b []byte) int {
	a, _ := m.automata()
	if a.maxLen < 2 {
		return 0
	}
	st := int32(0)
	for _, c := range b[max(len(b)-(a.maxLen-1), 0):] {
		st = a.step(st, c)
	}
	d := int(a.depth[st])
	if d < MinTailPrefix {
		return 0
	}
	return d
}
