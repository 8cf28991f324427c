package redact

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// naiveFind is matcher.find by brute force: the leftmost position where
// some pattern starts, and the longest pattern there.
func naiveFind(pats []string, s string, from int) (int, int) {
	for i := from; i < len(s); i++ {
		best := -1
		for _, p := range pats {
			if strings.HasPrefix(s[i:], p) && len(p) > best {
				best = len(p)
			}
		}
		if best >= 0 {
			return i, i + best
		}
	}
	return -1, -1
}

// matcherFor registers values in a fresh Scrubber and returns its matcher
// and every pattern it holds.
func matcherFor(values ...[]byte) (*matcher, []string) {
	s := NewScrubber()
	for _, v := range values {
		s.Register(v)
	}
	m := s.load()
	if m == nil {
		return nil, nil
	}
	var held []string
	for _, ps := range m.byFirst {
		held = append(held, ps...)
	}
	return m, held
}

// checkFind compares find with naiveFind at every start of text.
func checkFind(t *testing.T, m *matcher, pats []string, text string) {
	t.Helper()
	for from := 0; from <= len(text); from++ {
		i, j := m.find(text, from)
		ni, nj := naiveFind(pats, text, from)
		if i != ni || j != nj {
			t.Fatalf("find(%q, %d) = [%d,%d), naive [%d,%d); patterns %q", text, from, i, j, ni, nj, pats)
		}
	}
}

// TestFindMatchesNaive checks the shift-table search against brute force
// on texts built from the patterns' own bytes (so that near misses,
// overlaps and repeats are frequent), for short and long minimum lengths.
func TestFindMatchesNaive(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabets := []string{"ab", "abc:", "0123456789abcdef", "aA%2F/+=_-"}
	for round := range 400 {
		alpha := alphabets[round%len(alphabets)]
		word := func(n int) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = alpha[rng.IntN(len(alpha))]
			}
			return b
		}
		var values [][]byte
		for range 1 + rng.IntN(4) {
			values = append(values, word(MinValueLen+rng.IntN(12)))
		}
		m, pats := matcherFor(values...)
		if m == nil {
			continue
		}
		var text strings.Builder
		for range rng.IntN(12) {
			switch rng.IntN(3) {
			case 0:
				p := pats[rng.IntN(len(pats))]
				text.WriteString(p[:rng.IntN(len(p)+1)]) // a pattern or a prefix of one
			default:
				text.Write(word(rng.IntN(6)))
			}
		}
		checkFind(t, m, pats, text.String())
	}
}

// FuzzFind compares find with brute force on arbitrary values and text.
func FuzzFind(f *testing.F) {
	f.Add([]byte("abcd"), []byte("abcdefgh"), "xabcdefghx abcdx YWJjZA")
	f.Add([]byte("secretxyz"), []byte("D]xyz"), "a secretxyzxyz D]xyz")
	f.Fuzz(func(t *testing.T, v, w []byte, text string) {
		if len(text) > 256 {
			text = text[:256]
		}
		m, pats := matcherFor(v, w)
		if m == nil {
			return
		}
		checkFind(t, m, pats, text)
		checkFind(t, m, pats, text+string(v)+text+string(w))
	})
}
