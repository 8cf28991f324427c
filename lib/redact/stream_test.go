package redact

import (
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/matryer/is"
)

// streamValues are held values of the kinds the property tests use:
// plain, with bytes every escape touches, hex digits only, non-ASCII,
// and one that overlaps the marker.
var streamValues = []string{
	"s3cr3tvalue-0123",
	"sk/CAN4RY+&<q>\"j\\zz'op==",
	"deadbeef00c0ffee",
	"päss wörd~42",
	"D]xyz_tok",
}

// TestStreamOracle: random texts of held values in every form and
// noise, each cut at every offset into two pieces, at random into three
// and many, and into bytes, give what the buffered scrubber gives.
func TestStreamOracle(t *testing.T) {
	t.Parallel()
	for vi, v := range streamValues {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s := NewScrubber()
			s.Register([]byte(v))
			fm := streamForms(v)
			names := make([]string, 0, len(fm))
			for n := range fm {
				names = append(names, n)
			}
			sort.Strings(names)
			forms := make([]string, len(names))
			for i, n := range names {
				forms[i] = fm[n]
			}
			rng := rand.New(rand.NewPCG(uint64(vi), 7))
			for range 60 {
				x := []byte(streamText(rng, forms, 1+rng.IntN(10)))
				for i := 0; i <= len(x); i++ {
					is.NoErr(checkStream(s, x, []int{i}))
				}
				for range 20 {
					is.NoErr(checkStream(s, x, randomCuts(rng, len(x), 2)))
					is.NoErr(checkStream(s, x, randomCuts(rng, len(x), 1+rng.IntN(len(x)+1))))
				}
				is.NoErr(checkStream(s, x, everyByte(len(x))))
			}
		})
	}
}
