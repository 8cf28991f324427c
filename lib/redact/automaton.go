package redact

import "sync"

// automaton is an Aho–Corasick automaton over a set of patterns, as a
// dense table over byte classes (bytes that occur in no pattern share
// class 0, which always leads back to the root). The streaming scanners
// step it once per byte of text: its state is the longest suffix of the
// text read so far that is a prefix of some pattern, so depth tells how
// many bytes a scanner must keep to finish a match, and the state alone
// says which patterns end at the current byte.
type automaton struct {
	class  [256]uint8
	starts [256]bool // bytes that begin some pattern
	nclass int
	next   []int32 // state*nclass + class → state
	depth  []int32 // bytes of text the state stands for
	// longest is the length of the longest pattern that is a suffix of
	// the state's text (0: none); term is the state's own pattern length
	// (0: not a pattern's end); outLink is the nearest state on the
	// suffix chain with term > 0 (-1: none).
	longest []int32
	term    []int32
	outLink []int32
	maxLen  int
}

// newAutomaton builds the automaton of patterns (empty ones are
// ignored).
func newAutomaton(patterns []string) *automaton {
	a := &automaton{nclass: 1}
	for _, p := range patterns {
		for i := range len(p) {
			if a.class[p[i]] == 0 {
				a.class[p[i]] = uint8(a.nclass)
				a.nclass++
			}
		}
		if len(p) > 0 {
			a.starts[p[0]] = true
		}
		a.maxLen = max(a.maxLen, len(p))
	}
	nc := a.nclass
	newState := func(d int32) int32 {
		for range nc {
			a.next = append(a.next, -1)
		}
		a.depth = append(a.depth, d)
		a.term = append(a.term, 0)
		return int32(len(a.depth) - 1)
	}
	newState(0)
	for _, p := range patterns {
		if p == "" {
			continue
		}
		s := int32(0)
		for i := range len(p) {
			c := int32(a.class[p[i]])
			t := a.next[s*int32(nc)+c]
			if t < 0 {
				t = newState(int32(i + 1))
				a.next[s*int32(nc)+c] = t
			}
			s = t
		}
		a.term[s] = int32(len(p))
	}
	n := len(a.depth)
	fail := make([]int32, n)
	a.longest = make([]int32, n)
	a.outLink = make([]int32, n)
	a.outLink[0] = -1
	queue := make([]int32, 0, n)
	for c := range nc {
		t := a.next[c]
		if t < 0 || c == 0 {
			a.next[c] = 0
			continue
		}
		fail[t] = 0
		queue = append(queue, t)
	}
	for q := 0; q < len(queue); q++ {
		s := queue[q]
		f := fail[s]
		a.longest[s] = a.term[s]
		if a.longest[s] == 0 {
			a.longest[s] = a.longest[f]
		}
		if a.term[f] > 0 {
			a.outLink[s] = f
		} else {
			a.outLink[s] = a.outLink[f]
		}
		for c := range nc {
			i := s*int32(nc) + int32(c)
			t := a.next[i]
			if c == 0 {
				a.next[i] = 0
				continue
			}
			if t < 0 {
				a.next[i] = a.next[f*int32(nc)+int32(c)]
				continue
			}
			fail[t] = a.next[f*int32(nc)+int32(c)]
			queue = append(queue, t)
		}
	}
	return a
}

// step returns the state after reading c in state s.
func (a *automaton) step(s int32, c byte) int32 {
	return a.next[int(s)*a.nclass+int(a.class[c])]
}

// automata are the automata a matcher's streaming scanners use, built on
// first use: full holds every pattern; hex holds the patterns that
// separated hex can spell (lower-case hex digits only, at least
// minSeparatedHex long), or is nil when there are none.
type automata struct {
	once sync.Once
	full *automaton
	hex  *automaton
}

// automata returns m's automata, building them on first use.
func (m *matcher) automata() (full, hex *automaton) {
	m.auto.once.Do(func() {
		var all, hx []string
		for _, ps := range m.byFirst {
			for _, p := range ps {
				all = append(all, p)
				if len(p) >= minSeparatedHex && isLowerHex(p) {
					hx = append(hx, p)
				}
			}
		}
		m.auto.full = newAutomaton(all)
		if len(hx) > 0 {
			m.auto.hex = newAutomaton(hx)
		}
	})
	return m.auto.full, m.auto.hex
}

func isLowerHex(p string) bool {
	for i := range len(p) {
		if c := p[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
