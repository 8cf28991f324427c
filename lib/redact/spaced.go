package redact

import (
	"bytes"
	"unsafe"
)

// Forms with something between a value's characters: hex pairs with
// separators ("de:ad:be:ef", "DE AD BE EF", a hex dump), and any form with
// invisible characters inserted. Both are read by ContainsDecoded, within
// the bounds MaxHexSeparators and MaxInvisibleRun (bounds.go).

// Byte classes of the separated-hex scan.
const (
	classHex = 1 + iota
	classSeparator
)

// hexClass maps each byte to classHex, classSeparator or 0.
var hexClass = func() (t [256]uint8) {
	for _, c := range []byte("0123456789abcdefABCDEF") {
		t[c] = classHex
	}
	for _, c := range []byte("-:. ") {
		t[c] = classSeparator
	}
	return t
}()

// minSeparatedHex is the fewest hex digits a separated-hex match has: the
// hex of the shortest value registered.
const minSeparatedHex = 2 * MinValueLen

// separatedHex reports whether b holds a pattern of m spelled in hex
// pairs, any case, with runs of 1 to MaxHexSeparators separator bytes
// between some pairs (at least one such run inside the match). A match lies in a stretch of at least minStretch
// bytes that are all hex digits or separators. Such stretches are found
// as a string search finds a word: a window of minStretch bytes is read
// from its end backwards, and a byte outside the class moves the window
// past it, so most bytes of ordinary text are read once or not at all;
// only whole stretches are read closely.
func (m *matcher) separatedHex(b []byte) bool {
	n := len(b)
	known := 0 // b[i:known] is known to be in the class
	for i := 0; i+minStretch <= n; {
		q := i + minStretch - 1
		for q >= known && hexClass[b[q]] != 0 {
			q--
		}
		if q >= known { // b[q] breaks the window: the next one starts after it
			known = i + minStretch
			i = q + 1
			continue
		}
		end := i + minStretch
		for end < n && hexClass[b[end]] != 0 {
			end++
		}
		if m.separatedHexIn(b[i:end]) {
			return true
		}
		i, known = end+1, end+1
	}
	return false
}

// minStretch is the shortest stretch that can hold a separated-hex match:
// minSeparatedHex digits and a separator.
const minStretch = minSeparatedHex + 1

// separatedHexIn is separatedHex on a stretch of hex digits and
// separators: it cuts the stretch at separator runs longer than
// MaxHexSeparators and searches each part that has a separator and
// enough digits.
func (m *matcher) separatedHexIn(b []byte) bool {
	n := len(b)
	for i := 0; i < n; {
		for i < n && hexClass[b[i]] != classHex {
			i++
		}
		start, end, digits, seps := i, i, 0, 0
		j := i
		for j < n {
			if hexClass[b[j]] == classHex {
				digits++
				j++
				end = j
				continue
			}
			k := j
			for k < n && hexClass[b[k]] == classSeparator && k-j <= MaxHexSeparators {
				k++
			}
			if k-j > MaxHexSeparators || k == n {
				break
			}
			seps++
			j = k
		}
		if seps > 0 && digits >= minSeparatedHex && m.findPairs(b[start:end]) {
			return true
		}
		i = max(j, start+1)
	}
	return false
}

// findPairs reports whether run (hex digits and separator runs, starting
// and ending with a digit) holds a pattern of m, at least minSeparatedHex
// digits long, once its separators are removed and its digits lowered,
// where the pattern spans at least one removed separator run and every
// one it spans stood between two of its pairs (an even number of digits
// after the pattern's start).
func (m *matcher) findPairs(run []byte) bool {
	var bufArr [256]byte
	var cutArr [64]int
	digits, cuts := bufArr[:0], cutArr[:0]
	for i := 0; i < len(run); i++ {
		if c := run[i]; hexClass[c] == classHex {
			digits = append(digits, lower(c))
		} else if hexClass[run[i-1]] == classHex { // the first separator of a run
			cuts = append(cuts, len(digits))
		}
	}
	s := unsafe.String(unsafe.SliceData(digits), len(digits))
	for from := 0; ; {
		i, _ := m.find(s, from)
		if i < 0 {
			return false
		}
		for _, p := range m.byFirst[s[i]] {
			if len(p) >= minSeparatedHex && len(p) <= len(s)-i && s[i:i+len(p)] == p && pairAligned(cuts, i, i+len(p)) {
				return true
			}
		}
		from = i + 1
	}
}

// pairAligned reports whether some cut lies strictly inside [i, j) and
// every such cut is an even number of digits after i. A match is judged
// by the text it spans alone (a separator elsewhere in the run does not
// make plain hex "separated"), so that a stream can decide it without
// waiting for the end of the run.
func pairAligned(cuts []int, i, j int) bool {
	inside := false
	for _, c := range cuts {
		if c > i && c < j {
			if (c-i)%2 != 0 {
				return false
			}
			inside = true
		}
	}
	return inside
}

// invisibleAt returns the length of the invisible character at the start
// of b (U+200B–U+200D, U+2060, U+FEFF: 3 bytes; U+00AD: 2), or 0.
func invisibleAt(b []byte) int {
	switch {
	case len(b) >= 2 && b[0] == 0xC2 && b[1] == 0xAD:
		return 2
	case len(b) < 3:
		return 0
	case b[0] == 0xE2 && b[1] == 0x80 && b[2] >= 0x8B && b[2] <= 0x8D,
		b[0] == 0xE2 && b[1] == 0x81 && b[2] == 0xA0,
		b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF:
		return 3
	}
	return 0
}

// invisibleLeads are the first bytes of the invisible characters.
var invisibleLeads = [...]byte{0xE2, 0xEF, 0xC2}

// hasInvisible reports whether b holds an invisible character (a fast
// IndexByte for each first byte: most text has none).
func hasInvisible(b []byte) bool {
	for _, lead := range invisibleLeads {
		for rest := b; ; {
			i := bytes.IndexByte(rest, lead)
			if i < 0 {
				break
			}
			if invisibleAt(rest[i:]) > 0 {
				return true
			}
			rest = rest[i+1:]
		}
	}
	return false
}

// stripInvisible returns b without its runs of at most MaxInvisibleRun
// invisible characters, and whether it removed any; a longer run stays
// whole, so that no form matches across it.
func stripInvisible(b []byte) ([]byte, bool) {
	out := make([]byte, 0, len(b))
	removed := false
	for i := 0; i < len(b); {
		n := invisibleAt(b[i:])
		if n == 0 {
			out = append(out, b[i])
			i++
			continue
		}
		j, count := i, 0
		for {
			k := invisibleAt(b[j:])
			if k == 0 {
				break
			}
			j += k
			count++
		}
		if count > MaxInvisibleRun {
			out = append(out, b[i:j]...)
		} else {
			removed = true
		}
		i = j
	}
	return out, removed
}

// spaced reports whether b holds a pattern of m as separated hex, or in
// any form once runs of invisible characters within MaxInvisibleRun are
// removed.
func (m *matcher) spaced(b []byte) bool {
	if m.separatedHex(b) {
		return true
	}
	if !hasInvisible(b) {
		return false
	}
	w, removed := stripInvisible(b)
	return removed && (m.contains(w) || m.separatedHex(w))
}

// contains reports whether b holds a pattern of m.
func (m *matcher) contains(b []byte) bool {
	i, _ := m.find(unsafe.String(unsafe.SliceData(b), len(b)), 0)
	return i >= 0
}
