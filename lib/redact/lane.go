package redact

import "math"

// lane searches one view of a stream for the patterns of a matcher, as
// contains (an exact pattern) and separatedHex (hex pairs with
// separators) search a buffered view, and tells how far back it needs
// the text: to the first byte of the longest partial match.
//
// A view byte's origin (the text offset it comes from) is kept in a ring
// for bytes read one by one, and as an identity run (view position idN
// has origin idOrg, and so on) for plain text that every view reads
// alike; when such a run ends, only the origins a partial match can
// still ask for are written to the ring (partial matches only move
// forward).
type lane struct {
	full *automaton // nil: this lane does not look for exact patterns
	n    int64      // view bytes read
	org  []int64    // ring: the text offset of recent view bytes
	mask int64
	st   int32 // state of full

	idOn       bool
	idN, idOrg int64

	hx hexScan
}

// hexScan is separatedHex as a stream: the lower-cased digits of the
// current part (digits and separator runs of at most MaxHexSeparators)
// go through the hex automaton.
type hexScan struct {
	a         *automaton // nil: no separated hex
	hs        int32
	inPart    bool
	sepRun    int     // separators since the last digit
	digits    int64   // digits read, all parts
	partStart int64   // digits before the current part
	dpos      []int64 // ring: the view position of recent digits
	cuts      []int64 // ring: digit counts at which a separator run stood
	ncut      int64
	dmask     int64
}

// minRing is the smallest ring made. Rings start empty and are made
// when a partial match first needs one (most views of most streams
// never have one), then grow when a partial match needs more.
const minRing = 32

// growRing returns ring r (indexed by position & mask) with room for at
// least size entries, keeping the entries of positions [hi-len(r), hi).
func growRing(r []int64, mask, hi int64, size int) ([]int64, int64) {
	if size <= len(r) {
		return r, mask
	}
	n := pow2(max(size, 2*len(r), minRing))
	g, gm := make([]int64, n), int64(n-1)
	for q := max(hi-int64(len(r)), 0); q < hi; q++ {
		g[q&gm] = r[q&mask]
	}
	return g, gm
}

// room makes the digit rings hold size entries.
func (h *hexScan) room(size int) {
	if size > len(h.dpos) {
		mask := h.dmask
		h.dpos, h.dmask = growRing(h.dpos, mask, h.digits, size)
		h.cuts, _ = growRing(h.cuts, mask, h.ncut, size)
	}
}

func pow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// push reads one byte of the view, from text offset org, and reports
// whether a match ends at it.
func (l *lane) push(c byte, org int64) bool {
	if l.idOn {
		l.endIdentity()
	}
	if l.st == 0 && !l.hx.busy() && hexClass[c] == 0 && (l.full == nil || !l.full.used[c]) {
		// Nothing is under way and c begins nothing: no match can ever
		// ask for this byte's origin.
		l.n++
		return false
	}
	pos := l.n
	need := int64(1)
	if l.full != nil {
		need += int64(l.full.depth[l.st])
	}
	if p, ok := l.hx.partial(); ok {
		need = max(need, pos-p+1)
	}
	if need > int64(len(l.org)) {
		l.org, l.mask = growRing(l.org, l.mask, pos, int(need))
	}
	l.org[pos&l.mask] = org
	l.n++
	hit := false
	if l.full != nil {
		l.st = l.full.step(l.st, c)
		hit = l.full.longest[l.st] > 0
	}
	if l.hx.a != nil && l.hx.step(c, pos) {
		hit = true
	}
	return hit
}

// step reads one view byte at view position pos and reports whether a
// separated-hex match ends at it.
func (h *hexScan) step(c byte, pos int64) bool {
	switch hexClass[c] {
	case classHex:
		if len(h.dpos) == 0 {
			h.room(minRing) // the first digit this scan records
		}
		switch {
		case !h.inPart || h.sepRun > MaxHexSeparators:
			h.inPart, h.hs, h.partStart = true, 0, h.digits
		case h.sepRun > 0:
			h.cuts[h.ncut&h.dmask] = h.digits
			h.ncut++
		}
		h.sepRun = 0
		if p := h.digits - int64(h.a.depth[h.hs]); h.digits-p+1 > int64(len(h.dpos)) {
			h.room(int(h.digits - p + 1))
		}
		h.dpos[h.digits&h.dmask] = pos
		h.hs = h.a.step(h.hs, lower(c))
		h.digits++
		return h.a.longest[h.hs] > 0 && h.pairsMatch()
	case classSeparator:
		if h.inPart {
			h.sepRun++
		}
	default:
		h.inPart, h.hs, h.sepRun = false, 0, 0
	}
	return false
}

// pairsMatch reports whether a hex pattern ending at the last digit
// spans a separator run and has every separator run between two pairs.
func (h *hexScan) pairsMatch() bool {
	for s := h.hs; s > 0; s = h.a.outLink[s] {
		n := h.a.term[s]
		if n == 0 {
			continue
		}
		start := h.digits - int64(n)
		cut, odd := false, false
		for k := h.ncut - 1; k >= 0 && k > h.ncut-int64(len(h.cuts)); k-- {
			c := h.cuts[k&h.dmask]
			if c <= start {
				break
			}
			cut = true
			if (c-start)%2 != 0 {
				odd = true
				break
			}
		}
		if cut && !odd {
			return true
		}
	}
	return false
}

// busy reports whether a part is under way (a digit may continue it).
func (h *hexScan) busy() bool {
	return h.a != nil && h.inPart && h.sepRun <= MaxHexSeparators
}

// partialDepth returns how many digits the longest partial
// separated-hex match has (0: none).
func (h *hexScan) partialDepth() int32 {
	if !h.busy() {
		return 0
	}
	return h.a.depth[h.hs]
}

// partial returns the view position of the first digit of the longest
// partial separated-hex match, if any.
func (h *hexScan) partial() (int64, bool) {
	if h.a == nil || !h.inPart || h.sepRun > MaxHexSeparators {
		return 0, false
	}
	d := int64(h.a.depth[h.hs])
	if d == 0 {
		return 0, false
	}
	return h.dpos[(h.digits-d)&h.dmask], true
}

// low returns the first view position a partial match may need.
func (l *lane) low() int64 {
	low := l.n
	if l.full != nil {
		low -= int64(l.full.depth[l.st])
	}
	if p, ok := l.hx.partial(); ok {
		low = min(low, p)
	}
	return low
}

// origin returns the text offset of view position q.
func (l *lane) origin(q int64) int64 {
	if l.idOn && q >= l.idN {
		return l.idOrg + q - l.idN
	}
	return l.org[q&l.mask]
}

// endIdentity ends an identity run, writing to the ring the origins a
// partial match can still ask for.
func (l *lane) endIdentity() {
	low := l.low()
	if need := l.n - low; need > int64(len(l.org)) {
		l.org, l.mask = growRing(l.org, l.mask, l.idN, int(need))
	}
	for q := max(low, l.idN); q < l.n; q++ {
		l.org[q&l.mask] = l.idOrg + q - l.idN
	}
	l.idOn = false
}

// held returns the text offset of the first byte a match may still
// need, or math.MaxInt64.
func (l *lane) held() int64 {
	if low := l.low(); low < l.n {
		return l.origin(low)
	}
	return math.MaxInt64
}

// clone makes l a copy of m (a lane over the same automata). Of the
// rings, it copies only what a partial match of m may still ask for.
func (l *lane) clone(m *lane) {
	org, dpos, cuts := l.org, l.hx.dpos, l.hx.cuts
	*l = *m
	if len(org) < len(m.org) {
		org = make([]int64, len(m.org))
	}
	l.org, l.mask = org, int64(len(org)-1)
	for q := max(m.low(), m.n-int64(len(m.org))); q < m.n; q++ {
		l.org[q&l.mask] = m.org[q&m.mask]
	}
	h, g := &l.hx, &m.hx
	if g.a == nil {
		return
	}
	if len(dpos) < len(g.dpos) {
		dpos, cuts = make([]int64, len(g.dpos)), make([]int64, len(g.dpos))
	}
	h.dpos, h.cuts, h.dmask = dpos, cuts, int64(len(dpos)-1)
	if !g.busy() {
		return
	}
	for k := max(g.partStart, g.digits-int64(len(g.dpos))); k < g.digits; k++ {
		h.dpos[k&h.dmask] = g.dpos[k&g.dmask]
	}
	for k := max(g.ncut-int64(len(g.cuts)), 0); k < g.ncut; k++ {
		h.cuts[k&h.dmask] = g.cuts[k&g.dmask]
	}
}
