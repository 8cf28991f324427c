package redact

import (
	"sort"
	"sync"
)

// automaton is an Aho–Corasick automaton over a set of patterns: a trie
// whose edges are kept sparse (sorted per state; the root's in a table
// of 256), with failure links, so that it takes memory in proportion to
// the patterns' total length (a value of a few KiB, a PEM key, is
// fine). The streaming scanners step it once per byte of text: its
// state is the longest suffix of the text read so far that is a prefix
// of some pattern, so depth tells how many bytes a scanner must keep to
// finish a match, and the state alone says which patterns end at the
// current byte. A step follows failure links when the state has no edge
// for the byte; each link shortens the state, so stepping through a text
// costs O(1) amortised per byte.
type automaton struct {
	used   [256]bool  // bytes that occur in some pattern
	starts [256]bool  // bytes that begin some pattern
	root   [256]int32 // the root's transitions (complete: 0 for none)
	// Edges of state s (s > 0): edgeByte/edgeTo[first[s]:first[s+1]],
	// sorted by byte.
	first    []int32
	edgeByte []byte
	edgeTo   []int32
	fail     []int32
	depth    []int32 // bytes of text the state stands for
	// longest is the length of the longest pattern that is a suffix of
	// the state's text (0: none); term is the state's own pattern length
	// (0: not a pattern's end); outLink is the nearest state on the
	// suffix chain with term > 0 (-1: none).
	longest []int32
	term    []int32
	outLink []int32
	maxLen  int
	minLen  int // the shortest pattern's length (0: no patterns)
}

// newAutomaton builds the automaton of patterns (empty ones are
// ignored).
func newAutomaton(patterns []string) *automaton {
	a := &automaton{}
	type edge struct {
		from int32
		c    byte
		to   int32
	}
	child := map[uint64]int32{} // from<<8 | byte → to, while building the trie
	var edges []edge
	a.depth = append(a.depth, 0)
	a.term = append(a.term, 0)
	for _, p := range patterns {
		if p == "" {
			continue
		}
		a.starts[p[0]] = true
		a.maxLen = max(a.maxLen, len(p))
		if a.minLen == 0 || len(p) < a.minLen {
			a.minLen = len(p)
		}
		s := int32(0)
		for i := range len(p) {
			a.used[p[i]] = true
			k := uint64(s)<<8 | uint64(p[i])
			t, ok := child[k]
			if !ok {
				t = int32(len(a.depth))
				a.depth = append(a.depth, int32(i+1))
				a.term = append(a.term, 0)
				child[k] = t
				edges = append(edges, edge{s, p[i], t})
			}
			s = t
		}
		a.term[s] = int32(len(p))
	}
	n := len(a.depth)
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].from != edges[j].from {
			return edges[i].from < edges[j].from
		}
		return edges[i].c < edges[j].c
	})
	a.first = make([]int32, n+1)
	a.edgeByte = make([]byte, len(edges))
	a.edgeTo = make([]int32, len(edges))
	for i, e := range edges {
		a.edgeByte[i], a.edgeTo[i] = e.c, e.to
		a.first[e.from+1]++
	}
	for s := 1; s <= n; s++ {
		a.first[s] += a.first[s-1]
	}
	a.fail = make([]int32, n)
	a.longest = make([]int32, n)
	a.outLink = make([]int32, n)
	a.outLink[0] = -1
	queue := make([]int32, 0, n)
	for i := a.first[0]; i < a.first[1]; i++ {
		t := a.edgeTo[i]
		a.root[a.edgeByte[i]] = t
		queue = append(queue, t)
	}
	for q := 0; q < len(queue); q++ {
		s := queue[q]
		f := a.fail[s]
		a.longest[s] = a.term[s]
		if a.longest[s] == 0 {
			a.longest[s] = a.longest[f]
		}
		if a.term[f] > 0 {
			a.outLink[s] = f
		} else {
			a.outLink[s] = a.outLink[f]
		}
		for i := a.first[s]; i < a.first[s+1]; i++ {
			t := a.edgeTo[i]
			a.fail[t] = a.step(f, a.edgeByte[i])
			queue = append(queue, t)
		}
	}
	return a
}

// edge returns the trie edge of state s (> 0) for c, or -1.
func (a *automaton) edge(s int32, c byte) int32 {
	for i := a.first[s]; i < a.first[s+1]; i++ {
		if a.edgeByte[i] == c {
			return a.edgeTo[i]
		}
	}
	return -1
}

// step returns the state after reading c in state s.
func (a *automaton) step(s int32, c byte) int32 {
	if !a.used[c] {
		return 0
	}
	for s != 0 {
		if t := a.edge(s, c); t >= 0 {
			return t
		}
		s = a.fail[s]
	}
	return a.root[c]
}

// automata are the automata a matcher's streaming scanners use, built on
// first use: full holds every pattern; hex holds the patterns that
// separated hex can spell (lower-case hex digits only, at least
// minSeparatedHex long), or is nil when there are none.
type automata struct {
	once  sync.Once
	full  *automaton
	hex   *automaton
	quick *quickTables // what quick reads, made from full and hex
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
		m.auto.quick = newQuickTables(m.auto.full, m.auto.hex)
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
