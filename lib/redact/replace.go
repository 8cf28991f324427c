package redact

import "unsafe"

// replacer replaces the patterns of one automaton in text that arrives
// in pieces; Scrub runs it over a whole text as one piece, so the
// buffered and the streaming scrubber are one implementation.
//
// The rule: replace the leftmost match, longest at its position, with
// Redacted, then look again from the start of the text as it now reads,
// until nothing matches. A match that overlaps an earlier Redacted (a
// pattern that shares bytes with "[REDACTED]", such as one that starts
// with "D]") does not nest a second marker inside the first: the two
// merge into one Redacted that covers both. Each replacement removes at
// least one byte of the original text or merges two markers, so the
// process ends, and its result contains no pattern. When no replacement
// creates a new match (the patterns of almost every value), it is the
// single left-to-right pass of strings.Replacer.
//
// Streaming needs no more than the longest pattern of look-ahead: a new
// match that a replacement creates starts inside the text held back (a
// suffix that is a proper prefix of a pattern, or the context such a
// suffix needs when patterns can cross a marker's left edge), so looking
// again "from the start" means from the start of what is held.
type replacer struct {
	a *automaton
	m *matcher // its fast search, to skip text with no match
	// crossLeft is set when some pattern has '[' after its first byte:
	// only then can a match begin before a marker and run into it.
	crossLeft bool
	out       []byte  // final text, not yet taken by the caller
	work      []byte  // text held: read, or not final yet
	kind      []uint8 // per byte of work: 0 text, k>0 byte k-1 of a Redacted
	ctx       []int32 // crossLeft: per position of work, where its left context starts
	scan      int     // bytes of work the automaton has read since it restarted
	st        int32   // automaton state after work[:scan]
	cs, ce    int     // the candidate match [cs, ce) in work, cs < 0: none
}

// Sizes of the replacer's work: text moves into it replaceBlock bytes at
// a time, and final text moves out once it holds more than
// replaceSlack bytes beyond what a partial match may need.
const (
	replaceBlock = 64
	replaceSlack = 256
)

func newReplacer(m *matcher) *replacer {
	a, _ := m.automata()
	r := &replacer{a: a, m: m, cs: -1}
	r.crossLeft = a.used['['] && a.crossesLeft()
	if r.crossLeft {
		r.ctx = append(r.ctx, 0)
	}
	return r
}

// crossesLeft reports whether some pattern has '[' after its first byte
// (such a pattern may start before a Redacted and run into it).
func (a *automaton) crossesLeft() bool {
	for s := 1; s < len(a.depth); s++ {
		if a.edge(int32(s), '[') >= 0 {
			return true
		}
	}
	return false
}

// run reads in (not kept) and moves to out the text that is final: at
// the end of the text (final), all of it, with every match replaced.
func (r *replacer) run(in []byte, final bool) {
	limit := 2*r.a.maxLen + len(Redacted) + replaceSlack
	for {
		if r.scan < len(r.work) {
			r.step()
			if len(r.work) > limit {
				r.settleOut()
			}
			continue
		}
		if len(in) > 0 {
			in = r.skip(in)
			n := min(len(in), replaceBlock)
			r.work = append(r.work, in[:n]...)
			r.kind = append(r.kind, make([]uint8, n)...)
			in = in[n:]
			continue
		}
		if final && r.cs >= 0 {
			r.commit()
			continue
		}
		break
	}
	if final {
		r.take(len(r.work))
		return
	}
	r.settleOut()
}

// skip moves to out, with the matcher's fast search, the text of in
// that cannot take part in a match when nothing is under way: up to the
// next match, but never into the last maxLen bytes, where a longer
// match may start earlier and end past the text.
func (r *replacer) skip(in []byte) []byte {
	if r.st != 0 || r.cs >= 0 || r.crossLeft || len(in) <= r.a.maxLen {
		return in
	}
	n := len(in) - r.a.maxLen
	if i, _ := r.m.find(unsafe.String(unsafe.SliceData(in), len(in)), 0); i >= 0 {
		n = min(n, i)
	}
	if n == 0 {
		return in
	}
	r.take(len(r.work)) // all read, nothing under way: all final
	r.out = append(r.out, in[:n]...)
	return in[n:]
}

// step reads the next byte of work.
func (r *replacer) step() {
	r.st = r.a.step(r.st, r.work[r.scan])
	r.scan++
	if r.crossLeft {
		r.ctx = append(r.ctx[:r.scan], r.ctxAt(r.scan))
	}
	if l := int(r.a.longest[r.st]); l > 0 {
		if s := r.scan - l; r.cs < 0 || s < r.cs || s == r.cs && r.scan > r.ce {
			r.cs, r.ce = s, r.scan
		}
	}
	if r.cs >= 0 && r.scan-int(r.a.depth[r.st]) > r.cs {
		r.commit()
	}
}

// settleOut moves to out the bytes of work that are final.
func (r *replacer) settleOut() {
	e := r.scan - int(r.a.depth[r.st])
	if r.cs >= 0 {
		e = min(e, r.cs)
	}
	r.take(r.settle(e))
}

// held returns how many bytes the replacer holds back.
func (r *replacer) held() int { return len(r.work) }

// ctxAt returns where the left context of position p starts: a match
// starting at p may be replaced, and a pattern ending inside the new
// marker may start as early as the longest suffix before p that is a
// proper prefix of a pattern, and so on back.
func (r *replacer) ctxAt(p int) int32 {
	if d := int(r.a.depth[r.st]); d > 0 {
		return r.ctx[p-d]
	}
	return int32(p)
}

// settle moves e back so that no marker is split and, when patterns can
// cross a marker's left edge, so that every left context is kept.
func (r *replacer) settle(e int) int {
	for {
		f := e
		if f < len(r.work) && f > 0 && r.kind[f] > 1 {
			f -= int(r.kind[f]) - 1
		}
		if r.crossLeft && f < len(r.ctx) {
			f = min(f, int(r.ctx[f]))
		}
		if f == e {
			return e
		}
		e = f
	}
}

// commit replaces the candidate, merged with any marker it overlaps,
// and restarts the scan where a new match could begin.
func (r *replacer) commit() {
	x, y := r.cs, r.ce
	if k := r.kind[x]; k > 1 {
		x -= int(k) - 1
	}
	if k := r.kind[y-1]; k > 0 {
		y += len(Redacted) - int(k)
	}
	from := x
	if r.crossLeft {
		from = int(r.ctx[x])
	}
	n := len(Redacted) - (y - x)
	if n > 0 {
		r.work = append(r.work, make([]byte, n)...)
		r.kind = append(r.kind, make([]uint8, n)...)
	}
	copy(r.work[x+len(Redacted):], r.work[y:])
	copy(r.kind[x+len(Redacted):], r.kind[y:])
	if n < 0 {
		r.work = r.work[:len(r.work)+n]
		r.kind = r.kind[:len(r.kind)+n]
	}
	copy(r.work[x:], Redacted)
	for i := range len(Redacted) {
		r.kind[x+i] = uint8(i + 1)
	}
	r.cs, r.ce = -1, -1
	// Rescan from `from`: nothing before it can take part in a match.
	r.st, r.scan = 0, from
	if r.crossLeft {
		// Positions before from keep their contexts; from itself has
		// none (ctx[x] ends its chain at a position without one).
		r.ctx = append(r.ctx[:from], int32(from))
	}
}

// take moves the first n bytes of work, final, to out.
func (r *replacer) take(n int) {
	if n == 0 {
		return
	}
	r.out = append(r.out, r.work[:n]...)
	r.work = r.work[:copy(r.work, r.work[n:])]
	r.kind = r.kind[:copy(r.kind, r.kind[n:])]
	r.scan = max(r.scan-n, 0)
	if r.cs >= 0 {
		r.cs -= n
		r.ce -= n
	}
	if r.crossLeft {
		c := r.ctx[:copy(r.ctx, r.ctx[min(n, len(r.ctx)):])]
		for i := range c {
			c[i] = max(c[i]-int32(n), 0)
		}
		if len(c) == 0 {
			c = append(c, 0)
		}
		r.ctx = c
	}
}

// replaceAll is Scrub's work on a text with at least one match.
func replaceAll(m *matcher, s string) string {
	r := newReplacer(m)
	r.out = make([]byte, 0, len(s)+len(Redacted))
	r.run(unsafe.Slice(unsafe.StringData(s), len(s)), true)
	return string(r.out)
}
