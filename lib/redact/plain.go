package redact

// Plain text (no byte that a transducer changes or holds) reads the same
// in every view, so the lanes read it together rather than one by one.

// plainRun reads run, text at offsets org..org+len(run)-1 that every lane
// reads alike (no transducer changes it), and reports whether a match
// ends in it. Lanes in the same automaton state step once: they start
// in a few states and meet within a few bytes. Separated hex is read
// per lane only up to the first byte outside hex digits and separators,
// which ends every part; the rest is read once and its state copied.
func plainRun(lanes []*lane, run []byte, org int64, scratch *hexScan) bool {
	if len(run) == 0 {
		return false
	}
	var full *automaton
	var cur [2 * numViews]int32
	var idx [2 * numViews]int
	nd := 0
	for i, l := range lanes {
		if !l.idOn || l.idOrg+l.n-l.idN != org {
			if l.idOn {
				l.endIdentity()
			}
			l.idOn, l.idN, l.idOrg = true, l.n, org
		}
		if l.full == nil {
			continue
		}
		full = l.full
		j := 0
		for j < nd && cur[j] != l.st {
			j++
		}
		if j == nd {
			cur[nd] = l.st
			nd++
		}
		idx[i] = j
	}
	hit := false
	if full != nil {
		i := 0
		for ; i < len(run) && nd > 1; i++ {
			c := run[i]
			same := true
			for j := range nd {
				s := full.step(cur[j], c)
				cur[j] = s
				if full.longest[s] > 0 {
					hit = true
				}
				same = same && s == cur[0]
			}
			if same {
				nd = 1
				for k := range idx {
					idx[k] = 0
				}
			}
		}
		s, longest := cur[0], full.longest
		for ; i < len(run); i++ {
			if c := run[i]; s == 0 {
				s = full.root[c]
			} else {
				s = full.step(s, c)
			}
			if longest[s] > 0 {
				hit = true
			}
		}
		cur[0] = s
		for i, l := range lanes {
			if l.full != nil {
				l.st = cur[idx[i]]
			}
		}
	}
	if lanes[0].hx.a != nil && plainHex(lanes, run, scratch) {
		hit = true
	}
	for _, l := range lanes {
		l.n += int64(len(run))
	}
	return hit
}

// plainHex is plainRun's separated-hex part. A lane with no part under
// way reads run like any other such lane: one scan from the run's start
// serves them all. The first byte outside hex digits and separators (at
// f) ends every part, so from there on every lane reads like that scan;
// a lane with a part under way reads the bytes before f itself.
func plainHex(lanes []*lane, run []byte, sh *hexScan) bool {
	f := 0
	for f < len(run) && hexClass[run[f]] != 0 {
		f++
	}
	hit := false
	var base [2 * numViews]int64
	var busy [2 * numViews]bool
	anyIdle := false
	for i, l := range lanes {
		base[i] = l.hx.digits
		busy[i] = l.hx.busy()
		if !busy[i] {
			anyIdle = true
			continue
		}
		for k := range f {
			if l.hx.step(run[k], l.n+int64(k)) {
				hit = true
			}
		}
	}
	if !anyIdle && f == len(run) {
		return hit
	}
	sh.hs, sh.inPart, sh.sepRun, sh.digits, sh.partStart, sh.ncut = 0, false, 0, 0, 0, 0
	for k := 0; k < len(run); k++ {
		if !sh.inPart {
			// No part under way: only a digit starts one.
			for k < len(run) && hexClass[run[k]] != classHex {
				k++
			}
			if k == len(run) {
				break
			}
		}
		if sh.hs == 0 {
			// No partial match: bytes up to a digit that begins a
			// pattern can start none, and the digits they add, and
			// the separator runs between them, lie before any match
			// still to come.
			k = sh.skip(run, k)
			if k == len(run) {
				break
			}
		}
		if sh.step(run[k], int64(k)) && (k >= f || anyIdle) {
			hit = true
		}
	}
	for i, l := range lanes {
		h := &l.hx
		if busy[i] && f == len(run) {
			continue // it read all of run itself
		}
		h.room(len(sh.dpos))
		h.hs, h.inPart, h.sepRun = sh.hs, sh.inPart, sh.sepRun
		h.digits = base[i] + sh.digits
		h.partStart = base[i] + sh.partStart
		if !sh.inPart {
			continue
		}
		for k := max(sh.partStart, sh.digits-int64(len(sh.dpos))); k < sh.digits; k++ {
			h.dpos[(base[i]+k)&h.dmask] = l.n + sh.dpos[k&sh.dmask]
		}
		first := sh.ncut
		for first > 0 && first > sh.ncut-int64(len(sh.cuts)) && sh.cuts[(first-1)&sh.dmask] > sh.partStart {
			first--
		}
		for k := first; k < sh.ncut; k++ {
			h.cuts[h.ncut&h.dmask] = base[i] + sh.cuts[k&sh.dmask]
			h.ncut++
		}
	}
	return hit
}

// skip reads run from k on while no partial match is under way, up to
// the first digit that begins a pattern, which it returns (or
// len(run)). It keeps the part, the separator run and the digit count
// as step would; it records neither the digits' positions nor the
// separator runs, which no match can ask for (every match still to come
// begins at a later digit).
func (h *hexScan) skip(run []byte, k int) int {
	for ; k < len(run); k++ {
		c := run[k]
		switch hexClass[c] {
		case classHex:
			if h.a.starts[lower(c)] {
				return k
			}
			if !h.inPart || h.sepRun > MaxHexSeparators {
				h.inPart, h.partStart = true, h.digits
			}
			h.sepRun = 0
			h.digits++
		case classSeparator:
			if h.inPart {
				h.sepRun++
			}
		default:
			h.inPart, h.sepRun = false, 0
		}
	}
	return k
}

// mayEnd reports whether a match may end in a plain run of n bytes: a
// match that does is at least the shortest pattern long, and what of it
// comes before the run is a partial match a lane holds now (its
// automaton state's depth, or the digits of its separated-hex part).
func (v *views) mayEnd(n int) bool {
	for _, l := range v.active {
		if l.full != nil && int(l.full.depth[l.st])+n >= l.full.minLen {
			return true
		}
		if h := &l.hx; h.a != nil {
			d := 0
			if h.busy() {
				d = int(h.a.depth[h.hs])
			}
			if d+n >= h.a.minLen {
				return true
			}
		}
	}
	return false
}

// laneSnap is what save keeps: the active lanes, and the digit rings of
// those with a separated-hex part under way.
type laneSnap struct {
	lanes      [2 * numViews]lane
	dpos, cuts [2 * numViews][]int64
}

// save keeps the state of the active lanes that plainRun changes, for
// restore.
func (v *views) save() {
	if v.snap == nil {
		v.snap = new(laneSnap)
	}
	for i, l := range v.active {
		v.snap.lanes[i] = *l
		if l.hx.busy() {
			v.snap.dpos[i] = append(v.snap.dpos[i][:0], l.hx.dpos...)
			v.snap.cuts[i] = append(v.snap.cuts[i][:0], l.hx.cuts...)
		}
	}
}

// restore puts the active lanes back as save found them. The rings a
// part under way needs are copied back; the others hold nothing a
// partial match may ask for.
func (v *views) restore() {
	for i, l := range v.active {
		*l = v.snap.lanes[i]
		if l.hx.busy() {
			copy(l.hx.dpos, v.snap.dpos[i])
			copy(l.hx.cuts, v.snap.cuts[i])
		}
	}
}
