package pipeline

import (
	"unicode/utf8"

	"hostkit.dev/cmd/egressd/internal/scan"
)

// placeholderLen is the length of a placeholder: "hkp_" and 32
// lowercase unpadded base32 characters (bundle.FindPlaceholders).
const placeholderLen = 36

// phPrefix is what every placeholder begins with.
const phPrefix = "hkp_"

// phClass reports whether c may follow "hkp_" in a placeholder.
func phClass(c byte) bool { return 'a' <= c && c <= 'z' || '2' <= c && c <= '7' }

// phSentinel stands, in a lowered view, for a rune that does not lower to
// ASCII: no placeholder byte is ever one.
const phSentinel = 0x80

// phScan finds placeholders in a body that arrives in pieces, in the
// views knownPlaceholder reads a whole body in: the text, and its
// percent-decodings up to scan.MaxDecodeRounds deep, each lowered as
// strings.ToLower lowers it (so "HKP_...", and "K" as U+212A KELVIN SIGN,
// are that placeholder). Each candidate, once whole, is looked up with
// known. held says from which byte of the body on the text may still be
// part of a placeholder: the start of a partial "hkp_..." in some view,
// of an escape not yet ended, of a rune not yet whole.
type phScan struct {
	known  func(string) bool
	levels []*phLevel // levels[0] reads the text; levels[k] its k-th decoding, made when a '%' first reaches it
	hit    bool
}

// phLevel is one view: a percent-decoder of the level below (none at
// level 0), a lowerer and a matcher. Every byte carries the offset in
// the body of the first body byte it came from.
type phLevel struct {
	// The decoder: a '%' and up to one hex digit, waiting for the next.
	pend    [2]byte
	pendAt  [2]int64
	npend   int
	decodes bool // levels above 0 decode their input

	// The lowerer: the start of U+0130 or U+212A not yet whole, and the
	// offset of its first byte.
	rune   [2]byte
	nrune  int
	runeAt int64

	// The matcher: the last four lowered bytes and their offsets (for
	// "hkp_"), and a candidate after its "hkp_" (cand ≥ 4: its length).
	last   uint32
	lastAt [4]int64
	nlast  int
	cand   int
	candAt int64
	win    [placeholderLen]byte
}

func newPhScan(known func(string) bool) *phScan {
	return &phScan{known: known, levels: []*phLevel{{}}}
}

// write reads p, the body's bytes from offset at on.
func (s *phScan) write(p []byte, at int64) {
	for i, c := range p {
		s.push(0, c, at+int64(i))
		if s.hit {
			return
		}
	}
}

// push gives c (from body offset at) to level k.
func (s *phScan) push(k int, c byte, at int64) {
	l := s.levels[k]
	if !l.decodes {
		s.lower(k, c, at)
		return
	}
	// Lenient percent-decoding, as scan's: "%XX" with two hex digits is
	// one byte, anything else stays as it is.
	switch l.npend {
	case 0:
		if c == '%' {
			l.pend[0], l.pendAt[0], l.npend = c, at, 1
			return
		}
		s.out(k, c, at)
	case 1:
		if unhex(c) >= 0 {
			l.pend[1], l.pendAt[1], l.npend = c, at, 2
			return
		}
		l.npend = 0
		s.out(k, '%', l.pendAt[0])
		s.push(k, c, at)
	case 2:
		l.npend = 0
		if unhex(c) >= 0 {
			s.out(k, byte(unhex(l.pend[1])<<4|unhex(c)), l.pendAt[0])
			return
		}
		s.out(k, '%', l.pendAt[0])
		s.out(k, l.pend[1], l.pendAt[1])
		s.push(k, c, at)
	}
}

// out is a byte of level k's view: lowered and matched there, and read
// by the level above.
func (s *phScan) out(k int, c byte, at int64) {
	s.lower(k, c, at)
}

// lower lowers level k's view as strings.ToLower would, matches it, and
// passes the view's bytes (before lowering, as the next decoding reads
// them) up. Only two runes lower to ASCII (U+0130 to "i", U+212A KELVIN
// SIGN to "k"; TestLowerToASCII checks every rune): a lead byte is never
// part of the rune before it, so their encodings are found by their
// bytes alone, and any other non-ASCII byte is a phSentinel (how many
// sentinels stand for a rune does not change what matches).
func (s *phScan) lower(k int, c byte, at int64) {
	if k < scan.MaxDecodeRounds && (c == '%' || k+1 < len(s.levels)) {
		s.up(k, c, at)
	}
	l := s.levels[k]
	switch {
	case l.nrune == 0 && c < utf8.RuneSelf:
		s.match(l, lowerASCII(c), at)
	case l.nrune == 0 && (c == 0xc4 || c == 0xe2):
		l.rune[0], l.nrune, l.runeAt = c, 1, at
	case l.nrune == 0:
		s.match(l, phSentinel, at)
	case l.rune[0] == 0xc4 && c == 0xb0: // U+0130
		l.nrune = 0
		s.match(l, 'i', l.runeAt)
	case l.rune[0] == 0xe2 && l.nrune == 1 && c == 0x84:
		l.rune[1], l.nrune = c, 2
	case l.nrune == 2 && c == 0xaa: // U+212A
		l.nrune = 0
		s.match(l, 'k', l.runeAt)
	default:
		// Not one of the two: a rune that does not lower to ASCII, or
		// invalid. c may begin one of them.
		l.nrune = 0
		s.match(l, phSentinel, l.runeAt)
		s.lowerOnly(l, c, at)
	}
}

// lowerOnly is lower's own part for a byte already passed up.
func (s *phScan) lowerOnly(l *phLevel, c byte, at int64) {
	switch {
	case c < utf8.RuneSelf:
		s.match(l, lowerASCII(c), at)
	case c == 0xc4 || c == 0xe2:
		l.rune[0], l.nrune, l.runeAt = c, 1, at
	default:
		s.match(l, phSentinel, at)
	}
}

// up passes a byte of level k's view to level k+1, which is made (with
// level k's state: the two views were the same until now) when the first
// '%' reaches it.
func (s *phScan) up(k int, c byte, at int64) {
	if k+1 == len(s.levels) {
		n := *s.levels[k]
		n.decodes, n.npend = true, 0
		s.levels = append(s.levels, &n)
	}
	s.push(k+1, c, at)
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// match reads one lowered byte of l's view.
func (s *phScan) match(l *phLevel, c byte, at int64) {
	l.last = l.last<<8 | uint32(c)
	copy(l.lastAt[:], l.lastAt[1:])
	l.lastAt[3] = at
	l.nlast = min(l.nlast+1, 4)
	if l.cand > 0 {
		if phClass(c) {
			l.win[l.cand] = c
			l.cand++
			if l.cand == placeholderLen {
				l.cand = 0
				if s.known(string(l.win[:])) {
					s.hit = true
					return
				}
			}
		} else {
			l.cand = 0
		}
	}
	// A candidate's class has no '_', so a new "hkp_" ends any candidate
	// before it: at most one is open at a time.
	if l.nlast == 4 && l.last == 'h'<<24|'k'<<16|'p'<<8|'_' {
		copy(l.win[:], phPrefix)
		l.cand, l.candAt = 4, l.lastAt[0]
	}
}

// held returns the offset of the first body byte that may still be part
// of a placeholder in some view, or end when none is.
func (s *phScan) held(end int64) int64 {
	h := end
	for _, l := range s.levels {
		if l.npend > 0 {
			h = min(h, l.pendAt[0])
		}
		if l.nrune > 0 {
			h = min(h, l.runeAt)
		}
		if l.cand > 0 {
			h = min(h, l.candAt)
		}
		// A suffix "h", "hk" or "hkp" may begin "hkp_".
		for n := min(l.nlast, 3); n > 0; n-- {
			if l.last&(1<<(8*n)-1) == phPrefixOf(n) {
				h = min(h, l.lastAt[4-n])
				break
			}
		}
	}
	return h
}

// phPrefixOf is the first n bytes of "hkp_" as the low bytes of a uint32.
func phPrefixOf(n int) uint32 {
	var v uint32
	for i := range n {
		v = v<<8 | uint32(phPrefix[i])
	}
	return v
}

// flush ends the body: escapes and runes not yet ended are read as they
// stand (a lone '%' stays, an unfinished rune is RuneError).
func (s *phScan) flush() {
	for k := 0; k < len(s.levels) && !s.hit; k++ {
		l := s.levels[k]
		n := l.npend
		l.npend = 0
		for i := range n {
			s.out(k, l.pend[i], l.pendAt[i])
		}
		if l.nrune > 0 && !s.hit {
			l.nrune = 0
			s.match(l, phSentinel, l.runeAt) // a rune cut short
		}
	}
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
