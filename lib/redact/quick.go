package redact

import "unicode/utf8"

// The quiet fast path. While no transducer holds anything, every round
// above the first mirrors the one below it, every view's second lane
// mirrors its first, and every lane is in its automata's start state
// (the views are quiet), what the lanes will find depends only on the
// text still to come: a lane in the start state has no partial match,
// so no match can need a byte it has read, and the byte offsets it has
// counted matter to nobody. So quiet views need not read a byte that can
// take no lane out of its start state and that no transducer changes or
// holds: quick skips such bytes with a table scan (wakes, plainStop) and
// counts them in one step; it steps over a byte that wakes a lane when
// the next byte continues nothing it begins (quickTables.pairs), and
// follows the other bytes that wake a lane with one automaton state that
// stands for every lane (they all read the same bytes in the same
// state), until it is back in the start state. The escapes, line breaks
// and UTF-8 leads it reads are in quickstops.go.
// Only a partial match still under way where the run stops, a match, or
// an escape whose decoded bytes would wake a lane or a transducer goes to
// the byte-by-byte path (plain, push), which then reads it exactly as it
// would have without quick.

// quickTables are what quick reads, made once per set of values:
//
//   - wakes: the bytes that take some lane out of its start state: the
//     first bytes of the patterns of full, and the hex digits, in either
//     case, that begin a pattern of hex (separated hex lowers the digits
//     it reads);
//   - interest: wakes and plainStop, the bytes quick looks at;
//   - pairs: the pairs of bytes c1 c2 after which a lane that read c1 in
//     its start state may not simply be in the state c2 alone puts it
//     in: c1 c2 begins a pattern of full, or c1 begins one of hex (in
//     either case) and c2 is a separator or c1 c2 begins one of hex.
//     For any other pair, with c2 no plainStop byte, quick reads c1 as
//     if it woke nothing (no pattern is a single byte, so none ends at
//     c1 either).
//   - shortInert: the bytes c for which the two-byte JSON escape "\\c"
//     is inert (inertEscape): c names an escape ('"', '\\', '/', 'b',
//     'f', 't'; not the line breaks, which inertBreaks reads as a run),
//     neither '\\' nor c wakes a lane, and what it decodes to is no
//     byte quick looks at. The escape is decided by c alone.
type quickTables struct {
	wakes, interest byteSet
	shortInert      byteSet
	pairs           [65536 / 64]uint64
}

func newQuickTables(full, hex *automaton) *quickTables {
	q := &quickTables{wakes: full.starts}
	set := func(c1, c2 byte) {
		p := uint16(c1)<<8 | uint16(c2)
		q.pairs[p/64] |= 1 << (p % 64)
	}
	for i := full.first[0]; i < full.first[1]; i++ {
		c1, s := full.edgeByte[i], full.edgeTo[i]
		for k := full.first[s]; k < full.first[s+1]; k++ {
			set(c1, full.edgeByte[k])
		}
	}
	if hex != nil {
		cases := func(c byte) []byte {
			if 'a' <= c && c <= 'f' {
				return []byte{c, c - 'a' + 'A'}
			}
			return []byte{c}
		}
		for i := hex.first[0]; i < hex.first[1]; i++ {
			c1, s := hex.edgeByte[i], hex.edgeTo[i]
			for _, u := range cases(c1) {
				q.wakes[u] = true
				for _, sep := range []byte("-:. ") {
					set(u, sep)
				}
				for k := hex.first[s]; k < hex.first[s+1]; k++ {
					for _, w := range cases(hex.edgeByte[k]) {
						set(u, w)
					}
				}
			}
		}
	}
	if full.minLen < 2 {
		// A pattern of one byte ends where it begins: no pair
		// decides anything (Register makes none; newMatcher's
		// patterns are at least 2 bytes long).
		for i := range q.pairs {
			q.pairs[i] = ^uint64(0)
		}
	}
	for c := range 256 {
		q.interest[c] = q.wakes[c] || plainStop[c]
	}
	if !q.wakes['\\'] {
		for _, c := range []byte(`"\\/bft`) {
			r, _ := jsonEscape([]byte{'\\', c})
			q.shortInert[c] = !q.wakes[c] && !q.interest[byte(r)]
		}
	}
	return q
}

// pair reports whether c1 c2 is in q.pairs.
func (q *quickTables) pair(c1, c2 byte) bool {
	p := uint16(c1)<<8 | uint16(c2)
	return q.pairs[p/64]&(1<<(p%64)) != 0
}

// quick reads the text at the start of b (offset org) while the views
// are quiet, and returns how many bytes it read: 0 when the views are
// not quiet, or when b begins with a byte it leaves to the byte-by-byte
// path. The caller has checked that no transducer holds anything.
func (v *views) quick(b []byte, org int64) int {
	if v.slow || !v.quiet() {
		return 0
	}
	t := &v.q.interest
	i := 0
	for {
		// indexIn, from i on: most bytes are skipped here.
		for ; i+8 <= len(b); i += 8 {
			w := b[i : i+8 : i+8]
			if t[w[0]] || t[w[1]] || t[w[2]] || t[w[3]] || t[w[4]] || t[w[5]] || t[w[6]] || t[w[7]] {
				break
			}
		}
		for i < len(b) && !t[b[i]] {
			i++
		}
		if i == len(b) {
			break
		}
		if plainStop[b[i]] {
			if n := v.inertStop(b[i:]); n > 0 {
				i += n
				continue
			}
			if !v.literal(b[i:]) {
				break
			}
			// An introducer that every round reads as itself, and
			// that wakes a lane: the excursion takes it as text.
		}
		if i+1 < len(b) && !v.q.pair(b[i], b[i+1]) {
			if v.asIs(b[i+1:]) || v.breakPasses(b, i) {
				i++ // b[i] begins nothing that b[i+1] continues
				continue
			}
			if n := v.stopPasses(b, i); n > 0 {
				i += 1 + n // b[i], then the stop (which inertStop reads as n bytes)
				continue
			}
		}
		e, ok := v.excursion(b[i:])
		if ok {
			i += e
			continue
		}
		// A partial match is under way where the run stops, or a
		// match ends in it: the lanes read it the long way.
		v.skip(i, org)
		if e == 0 {
			return i
		}
		v.plain(b[i:i+e], org+int64(i))
		return i + e
	}
	v.skip(i, org)
	return i
}

// quiet reports whether the views are quiet (see quick), after letting
// every round and second lane that may mirror again do so. The caller
// has checked that no transducer holds anything.
func (v *views) quiet() bool {
	v.prepare()
	if len(v.active) != 4 {
		return false // a round or a second lane reads on its own
	}
	for _, l := range v.active {
		if l.st != 0 || l.hx.partialDepth() > 0 {
			return false
		}
	}
	return true
}

// skip counts n bytes of text, from offset org, read by the quiet views:
// each lane that reads on its own moves on by n, its identity run
// extended (or begun) over them, and any separated-hex part it had is
// dropped (one with no partial match decides nothing later: a match
// begins at a digit that begins a pattern, whatever came before it).
func (v *views) skip(n int, org int64) {
	if n == 0 {
		return
	}
	v.plainFlags()
	for _, l := range v.active {
		if !l.idOn || l.idOrg+l.n-l.idN != org {
			if l.idOn {
				l.endIdentity()
			}
			l.idOn, l.idN, l.idOrg = true, l.n, org
		}
		l.n += int64(n)
		l.hx.hs, l.hx.inPart, l.hx.sepRun = 0, false, 0
	}
}

// breakPasses reports whether b[i] (which wakes a lane) is followed by
// a run of line breaks that wake no lane and then by a plain byte x,
// and b[i] begins nothing that a line break or x continues: the views
// that keep the line breaks and those that drop them are then all back
// in the start state when x comes, as if b[i] had woken nothing. quick
// reads the run itself next (inertStop).
func (v *views) breakPasses(b []byte, i int) bool {
	if v.q.wakes['\r'] || v.q.wakes['\n'] {
		return false
	}
	j := i + 1
	for j < len(b) && newline[b[j]] {
		if v.q.pair(b[i], b[j]) {
			return false
		}
		j++
	}
	return j > i+1 && j < len(b) && !plainStop[b[j]] && !v.q.pair(b[i], b[j])
}

// stopPasses returns the length of the stop after b[i] (which wakes a
// lane), or 0, when b[i] is followed by a plainStop byte that quick
// reads without the long way (inertStop), and b[i] begins nothing with any byte that some view
// reads right after it: the stop's bytes as they are (the text view),
// the bytes an escape decodes to (the '+' view and the rounds), a space
// for '+' (the '+' view), and, when the stop is or decodes to line
// breaks, the byte after them (the views without line breaks, which
// read it next when they drop the run; endsBreaks has it reach them as
// it is, and it must begin no invisible character, which their twins
// would skip). No pattern is a single byte, so every view is then in
// the state it would be in had b[i] woken nothing.
func (v *views) stopPasses(b []byte, i int) int {
	j := i + 1
	if !plainStop[b[j]] {
		return 0
	}
	n := v.inertStop(b[j:])
	if n == 0 {
		return 0
	}
	c1 := b[i]
	for _, x := range b[j : j+n] {
		if v.q.pair(c1, x) {
			return 0
		}
	}
	breaks := newline[b[j]]
	switch b[j] {
	case '+':
		if v.q.pair(c1, ' ') {
			return 0
		}
	case '\\', '%', '=':
		kind, r, _, _ := decideQuiet(b[j:])
		var enc [utf8.UTFMax]byte
		d := enc[:0]
		switch kind {
		case escRune:
			d = utf8.AppendRune(d, r)
		case escByte:
			d = append(d, byte(r))
		}
		for _, x := range d {
			if v.q.pair(c1, x) {
				return 0
			}
		}
		if len(d) == 1 && newline[d[0]] {
			// A run of "\n" and "\r" escapes (inertBreaks): either
			// line break may come right after b[i].
			breaks = true
			if v.q.pair(c1, '\n') || v.q.pair(c1, '\r') {
				return 0
			}
		}
	}
	if breaks {
		k := j + n
		if k >= len(b) || v.q.pair(c1, b[k]) || !v.asIs(b[k:]) && b[k] != '+' {
			return 0
		}
	}
	return n
}

// excursion follows b, which begins with a byte that wakes some lane,
// with one state that stands for every quiet lane. It reports ok and
// the bytes read when the lanes are back in the start state with no
// match found; otherwise it returns how many bytes plain must read
// (up to the first plainStop byte or the end of b, or through the byte
// that ends a match). It reads an escape introducer that every round
// reads as itself (literal) as text; plain would not (it reads no
// plainStop byte), so when the lanes are not back in the start state
// after one it returns 0 and leaves the run to the byte-by-byte path.
func (v *views) excursion(b []byte) (int, bool) {
	full, hex := v.full, v.hex
	s, hs := int32(0), int32(0)
	inPart, sepRun := false, 0
	lit := false
	for j, c := range b {
		if plainStop[c] {
			if !v.literal(b[j:]) {
				if lit {
					return 0, false
				}
				return j, false
			}
			lit = true
		}
		if s == 0 {
			s = full.root[c]
		} else {
			s = full.step(s, c)
		}
		if full.longest[s] > 0 {
			if lit {
				return 0, false
			}
			return j + 1, false
		}
		if hex != nil {
			// hexScan.step without the rings: a pattern of hex
			// ending here (plain then checks its pairs) sends the
			// run to plain.
			switch hexClass[c] {
			case classHex:
				if !inPart || sepRun > MaxHexSeparators {
					inPart, hs = true, 0
				}
				sepRun = 0
				hs = hex.step(hs, lower(c))
				if hex.longest[hs] > 0 {
					if lit {
						return 0, false
					}
					return j + 1, false
				}
			case classSeparator:
				if inPart {
					sepRun++
				}
			default:
				inPart, hs, sepRun = false, 0, 0
			}
		}
		if s == 0 && (hs == 0 || sepRun > MaxHexSeparators) {
			return j + 1, true
		}
	}
	if lit {
		return 0, false
	}
	return len(b), false
}
