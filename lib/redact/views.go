package redact

import "math"

// The views a stream reads, as ContainsDecoded reads a buffered text:
// the text itself, the text with one level of escapes undone and '+' read
// as a space, and MaxDecodeLevels rounds of escapes undone, each also
// without line breaks; every view also with short runs of invisible
// characters removed.
const (
	viewText   = 0
	viewPlus   = 1
	viewLevel0 = 2                            // + round
	viewLines0 = viewLevel0 + MaxDecodeLevels // + round
	numViews   = viewLines0 + MaxDecodeLevels
)

// views is the streaming form of ContainsDecoded and Contains: write reads text as it comes, hit records whether
// any view has held a match so far, and held tells from which offset of
// the text on a match may still begin.
type views struct {
	lanes [2 * numViews]*lane // per view: the view, then the view without invisible characters
	lane  [2 * numViews]lane  // what lanes points to (one allocation)
	// full and hex are the lanes' automata, q what quick reads.
	full, hex *automaton
	q         *quickTables
	// slow makes write read every byte the long way, without quick:
	// the tests compare the two.
	slow  bool
	strip [numViews]invisibles
	plus  *unescaper
	unesc [MaxDecodeLevels]*unescaper
	ents  [MaxDecodeLevels]entities
	lines [MaxDecodeLevels]newlines
	// holdLines and holdInvisible report whether a held line break or
	// invisible character could begin a pattern once let through.
	holdLines, holdInvisible bool
	hit                      bool
	// at (once hit is set) is the text offset from which the echo may
	// begin: no earlier than the first byte of the match found first,
	// nor than the first byte held when it was found.
	at         int64
	hexScratch hexScan // plainRun's shared separated-hex state
	// mirror[r] (r ≥ 1): round r has undone nothing since it last was
	// idle, so its views read exactly as round r-1's and its transducers
	// and lanes are not fed; it takes round r-1's state (clone) when a
	// byte that may start an escape reaches it. The rounds that mirror
	// are always the last ones.
	mirror [MaxDecodeLevels]bool
	// twin[i]: view i has had no invisible character removed since its
	// transducer was last idle, so its second lane (the view without
	// invisible characters) reads exactly as its first and is not fed;
	// it takes the first's state when a byte that may start an
	// invisible character comes.
	twin   [numViews]bool
	active []*lane // scratch: the lanes plain feeds
	// snap: the active lanes before a plain run in which a match may
	// end, made on first use (most streams never need one)
	snap *laneSnap
	// scratch outputs, one per transducer
	plusOut  []vbyte
	unescOut [MaxDecodeLevels][]vbyte
	entsOut  [MaxDecodeLevels][]vbyte
	linesOut [MaxDecodeLevels][]vbyte
	stripOut [numViews][]vbyte
}

// newViews returns the views of m. The text view is searched for exact
// patterns too (Contains): a Stream's text is scrubbed, so they match
// there only for a Detector.
func newViews(m *matcher) *views {
	full, hex := m.automata()
	v := &views{plus: newUnescaper(true), at: math.MaxInt64, full: full, hex: hex, q: m.auto.quick}
	for i := range v.lanes {
		v.lane[i] = lane{full: full, hx: hexScan{a: hex}}
		v.lanes[i] = &v.lane[i]
	}
	for i := range numViews {
		v.twin[i] = true
	}
	for r := range MaxDecodeLevels {
		v.unesc[r] = newUnescaper(false)
		v.mirror[r] = r > 0
	}
	v.hexScratch = hexScan{a: hex}
	v.holdLines = full.starts['\r'] || full.starts['\n']
	v.holdInvisible = full.starts[0xE2] || full.starts[0xEF] || full.starts[0xC2]
	return v
}

// plainStop are the bytes that some transducer changes or holds: text
// without them reads the same in every view.
var plainStop = newByteSet("\\%=+&\r\n\xE2\xEF\xC2")

// plainChunk is the most bytes write gives plain at once while the views
// are idle but not quiet (quick).
const plainChunk = 16

// write reads text whose first byte is at offset org. It stops at the
// first match: the views then hold what they held right after its last
// byte, and read nothing more.
func (v *views) write(b []byte, org int64) {
	for len(b) > 0 && !v.hit {
		if v.idle() {
			if k := v.quick(b, org); k > 0 {
				b, org = b[k:], org+int64(k)
				continue
			}
			if v.hit {
				break
			}
			k := indexIn(b, &plainStop)
			if k < 0 {
				k = len(b)
			}
			if !v.slow {
				// A partial match under way ends within a few
				// bytes as a rule: come back to quick soon after.
				k = min(k, plainChunk)
			}
			if k > 0 {
				v.plain(b[:k], org)
				b, org = b[k:], org+int64(k)
				continue
			}
		}
		v.push(b[0], org)
		b, org = b[1:], org+1
		if v.hit {
			v.at = min(v.at, v.held())
		}
	}
}

// found records a match that ends at the byte lane l just read.
func (v *views) found(l *lane) {
	v.hit = true
	v.at = min(v.at, l.held())
}

// idle reports whether no transducer holds anything.
func (v *views) idle() bool {
	if len(v.plus.pend) > 0 || !v.strip[viewText].idle() || !v.strip[viewPlus].idle() {
		return false
	}
	for r := range MaxDecodeLevels {
		if !v.mirror[r] && !v.levelIdle(r) {
			return false
		}
	}
	return true
}

// levelIdle reports whether round r's transducers hold nothing.
func (v *views) levelIdle(r int) bool {
	return len(v.unesc[r].pend) == 0 && len(v.ents[r].pend) == 0 && len(v.lines[r].run) == 0 &&
		v.strip[viewLevel0+r].idle() && v.strip[viewLines0+r].idle()
}

// levelQuiet reports whether round r holds nothing and no lane of it has
// a match under way: from here on it reads like any other such round.
func (v *views) levelQuiet(r int) bool {
	if !v.levelIdle(r) {
		return false
	}
	for _, i := range [2]int{viewLevel0 + r, viewLines0 + r} {
		for _, l := range v.lanes[2*i : 2*i+2] {
			if l.st != 0 || l.hx.busy() {
				return false
			}
		}
	}
	return true
}

// activeLanes appends the lanes of view i that read on their own; a
// twin that has become quiet, as has its view's first lane, mirrors it
// again.
func (v *views) activeLanes(lanes []*lane, i int) []*lane {
	a, b := v.lanes[2*i], v.lanes[2*i+1]
	if !v.twin[i] && v.strip[i].idle() && a.st == 0 && b.st == 0 && !a.hx.busy() && !b.hx.busy() {
		v.twin[i] = true
	}
	if v.twin[i] {
		return append(lanes, a)
	}
	return append(lanes, a, b)
}

// unmirror gives round r (mirroring round r-1) round r-1's state, so
// that it can read on its own.
func (v *views) unmirror(r int) {
	v.mirror[r] = false
	for _, i := range [2]int{viewLevel0, viewLines0} {
		for k := range 2 {
			v.lanes[2*(i+r)+k].clone(v.lanes[2*(i+r-1)+k])
		}
		v.strip[i+r].clone(&v.strip[i+r-1])
		v.twin[i+r] = v.twin[i+r-1]
	}
	v.lines[r].clone(&v.lines[r-1])
	v.unesc[r].blocked = false
}

// plain reads text without plainStop bytes while no transducer holds
// anything: every view reads it as it is.
func (v *views) plain(run []byte, org int64) {
	v.prepare()
	v.plainFlags()
	v.plainLanes(run, org)
}

// plainFlags clears what a transducer remembers of the bytes before a
// plain byte (a soft line break just removed, a long run of line
// breaks): a plain byte ends both.
func (v *views) plainFlags() {
	v.plus.blocked = false
	for r := range MaxDecodeLevels {
		v.unesc[r].blocked = false
		v.lines[r].long = false
	}
}

// prepare puts in v.active the lanes that read on their own while no
// transducer holds anything. A round that is quiet, as is the one below
// it, mirrors it again.
func (v *views) prepare() {
	v.active = v.activeLanes(v.active[:0], viewText)
	v.active = v.activeLanes(v.active, viewPlus)
	// Mirroring rounds are always the last ones: a round that mirrors
	// is not fed, so no round after it could be.
	for r := MaxDecodeLevels - 1; r > 0; r-- {
		if !v.mirror[r] && (r+1 == MaxDecodeLevels || v.mirror[r+1]) && v.levelQuiet(r) && v.levelQuiet(r-1) {
			v.mirror[r] = true
		}
	}
	for r := range MaxDecodeLevels {
		if v.mirror[r] {
			continue
		}
		v.active = v.activeLanes(v.active, viewLevel0+r)
		v.active = v.activeLanes(v.active, viewLines0+r)
	}
}

// plainLanes is plain's reading of run by v.active.
func (v *views) plainLanes(run []byte, org int64) {
	saved := v.mayEnd(len(run))
	if saved {
		v.save()
	}
	if !plainRun(v.active, run, org, &v.hexScratch) || !saved {
		return // !saved: no match can end in run (mayEnd)
	}
	// A match ends in run: read it again byte by byte from where it
	// began, to stop right after the match's last byte.
	v.restore()
	for i := range run {
		if plainRun(v.active, run[i:i+1], org+int64(i), &v.hexScratch) {
			v.hit = true
			v.at = min(v.at, v.held())
			return
		}
	}
}

// push reads one byte of the text, at offset org.
func (v *views) push(c byte, org int64) {
	v.view(viewText, c, org)
	v.plusOut = v.plus.push(c, org, v.plusOut[:0])
	for _, x := range v.plusOut {
		v.view(viewPlus, x.c, x.org)
	}
	v.level(0, c, org)
}

// level feeds one byte into round r's unescaping.
func (v *views) level(r int, c byte, org int64) {
	v.unescOut[r] = v.unesc[r].push(c, org, v.unescOut[r][:0])
	for _, x := range v.unescOut[r] {
		v.entsOut[r] = v.ents[r].push(x.c, x.org, v.entsOut[r][:0])
		for _, y := range v.entsOut[r] {
			v.decoded(r, y.c, y.org)
		}
	}
}

// decoded takes one byte of round r's result.
func (v *views) decoded(r int, c byte, org int64) {
	next := r+1 < MaxDecodeLevels
	if next && v.mirror[r+1] && (c == '\\' || c == '%' || c == '=' || c == '&') {
		v.unmirror(r + 1) // before round r reads c: the next round starts from here
	}
	v.view(viewLevel0+r, c, org)
	v.linesOut[r] = v.lines[r].push(c, org, v.linesOut[r][:0])
	for _, x := range v.linesOut[r] {
		v.view(viewLines0+r, x.c, x.org)
	}
	if next && !v.mirror[r+1] {
		v.level(r+1, c, org)
	}
}

// isLead reports whether c may start an invisible character.
func isLead(c byte) bool { return c == 0xE2 || c == 0xEF || c == 0xC2 }

// view takes one byte of view i.
func (v *views) view(i int, c byte, org int64) {
	if v.twin[i] && isLead(c) {
		v.twin[i] = false
		v.lanes[2*i+1].clone(v.lanes[2*i])
	}
	if v.lanes[2*i].push(c, org) {
		v.found(v.lanes[2*i])
	}
	if v.twin[i] {
		return
	}
	v.stripOut[i] = v.strip[i].push(c, org, v.stripOut[i][:0])
	for _, x := range v.stripOut[i] {
		if v.lanes[2*i+1].push(x.c, x.org) {
			v.found(v.lanes[2*i+1])
		}
	}
}

// flush ends the text: every transducer lets out what it holds, in the
// order the text flows.
func (v *views) flush() {
	v.flushStrip(viewText)
	v.plusOut = v.plus.flush(v.plusOut[:0])
	for _, x := range v.plusOut {
		v.view(viewPlus, x.c, x.org)
	}
	v.flushStrip(viewPlus)
	for r := range MaxDecodeLevels {
		if v.mirror[r] {
			continue // reads as round r-1, which is flushed
		}
		v.unescOut[r] = v.unesc[r].flush(v.unescOut[r][:0])
		for _, x := range v.unescOut[r] {
			v.entsOut[r] = v.ents[r].push(x.c, x.org, v.entsOut[r][:0])
			for _, y := range v.entsOut[r] {
				v.decoded(r, y.c, y.org)
			}
		}
		v.entsOut[r] = v.ents[r].flush(v.entsOut[r][:0])
		for _, y := range v.entsOut[r] {
			v.decoded(r, y.c, y.org)
		}
		v.flushStrip(viewLevel0 + r)
		v.linesOut[r] = v.lines[r].flush(v.linesOut[r][:0])
		v.flushStrip(viewLines0 + r)
	}
}

func (v *views) flushStrip(i int) {
	if v.twin[i] {
		return // nothing held, nothing removed
	}
	v.stripOut[i] = v.strip[i].flush(v.stripOut[i][:0])
	for _, x := range v.stripOut[i] {
		if v.lanes[2*i+1].push(x.c, x.org) {
			v.found(v.lanes[2*i+1])
		}
	}
}

// held returns the offset of the first text byte that a match may still
// need, or math.MaxInt64.
func (v *views) held() int64 {
	h := int64(math.MaxInt64)
	for i, l := range v.lanes {
		if r := i/2 - viewLevel0; r >= 0 && v.mirror[r%MaxDecodeLevels] {
			continue // the same as round r-1's lane
		}
		if i%2 == 1 && v.twin[i/2] {
			continue // the same as the view's first lane
		}
		h = min(h, l.held())
	}
	hold := func(o int64, ok bool) {
		if ok {
			h = min(h, o)
		}
	}
	hold(v.plus.held())
	for r := range MaxDecodeLevels {
		if v.mirror[r] {
			continue
		}
		hold(v.unesc[r].held())
		hold(v.ents[r].held())
		if v.holdLines {
			hold(v.lines[r].held())
		}
	}
	if v.holdInvisible {
		for i := range v.strip {
			if r := i - viewLevel0; r < 0 || !v.mirror[r%MaxDecodeLevels] {
				hold(v.strip[i].held())
			}
		}
	}
	return h
}
