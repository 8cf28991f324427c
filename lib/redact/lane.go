package redact

import "math"

// lane searches one view of a stream for the patterns of a matcher, as
// contains (an exact pattern) and separatedHex (hex pairs with
// separators) search a buffered view, and tells how far back it needs
// the text: to the first byte of the longest partial match.
type lane struct {
	full *automaton // nil: this lane does not look for exact patterns
	hex  *automaton // nil: nor for separated hex
	n    int64      // view bytes read
	org  []int64    // ring: the text offset of each recent view byte
	mask int64
	st   int32 // state of full

	// Separated hex: the lower-cased digits of the current part (digits
	// and separator runs of at most MaxHexSeparators) go through hex.
	hs     int32
	inPart bool
	sepRun int   // separators since the last digit
	digits int64 // digits read, all parts
	dpos   []int64
	cuts   []int64 // ring: digit counts at which a separator run stood
	ncut   int64
	dmask  int64
}

// newLane returns a lane for full and hex (either may be nil).
func newLane(full, hex *automaton) *lane {
	l := &lane{full: full, hex: hex}
	need := 1
	if full != nil {
		need = max(need, full.maxLen+1)
	}
	if hex != nil {
		need = max(need, (1+MaxHexSeparators)*(hex.maxLen+1)+1)
		dn := pow2(hex.maxLen + 1)
		l.dpos = make([]int64, dn)
		l.cuts = make([]int64, dn)
		l.dmask = int64(dn - 1)
	}
	n := pow2(need)
	l.org = make([]int64, n)
	l.mask = int64(n - 1)
	return l
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
	pos := l.n
	l.org[pos&l.mask] = org
	l.n++
	hit := false
	if l.full != nil {
		l.st = l.full.step(l.st, c)
		hit = l.full.longest[l.st] > 0
	}
	if l.hex == nil {
		return hit
	}
	switch hexClass[c] {
	case classHex:
		switch {
		case !l.inPart || l.sepRun > MaxHexSeparators:
			l.inPart, l.hs = true, 0
		case l.sepRun > 0:
			l.cuts[l.ncut&l.dmask] = l.digits
			l.ncut++
		}
		l.sepRun = 0
		l.dpos[l.digits&l.dmask] = pos
		l.hs = l.hex.step(l.hs, lower(c))
		l.digits++
		if l.hex.longest[l.hs] > 0 && l.pairsMatch() {
			hit = true
		}
	case classSeparator:
		if l.inPart {
			l.sepRun++
		}
	default:
		l.inPart, l.hs, l.sepRun = false, 0, 0
	}
	return hit
}

// pairsMatch reports whether a hex pattern ending at the last digit
// spans a separator run and has every separator run between two pairs.
func (l *lane) pairsMatch() bool {
	for s := l.hs; s > 0; s = l.hex.outLink[s] {
		n := l.hex.term[s]
		if n == 0 {
			continue
		}
		start := l.digits - int64(n)
		cut, odd := false, false
		for k := l.ncut - 1; k >= 0 && k > l.ncut-int64(len(l.cuts)); k-- {
			c := l.cuts[k&l.dmask]
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

// held returns the text offset of the first byte a match may still
// need, or math.MaxInt64.
func (l *lane) held() int64 {
	h := int64(math.MaxInt64)
	if l.full != nil {
		if d := int64(l.full.depth[l.st]); d > 0 {
			h = l.org[(l.n-d)&l.mask]
		}
	}
	if l.hex != nil && l.inPart && l.sepRun <= MaxHexSeparators {
		if d := int64(l.hex.depth[l.hs]); d > 0 {
			h = min(h, l.org[l.dpos[(l.digits-d)&l.dmask]&l.mask])
		}
	}
	return h
}
