package holder

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/matryer/is"
)

func TestRingKeepsTheLastBytes(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for trial := 0; trial < 200; trial++ {
		size := 1 + rand.IntN(64)
		r := newRing(size)
		var all []byte
		for i := 0; i < 20; i++ {
			p := make([]byte, rand.IntN(2*size+1))
			for j := range p {
				p[j] = byte(rand.IntN(256))
			}
			r.Write(p)
			all = append(all, p...)
			want := all
			if len(want) > size {
				want = want[len(want)-size:]
			}
			seg := r.segments()
			is.True(bytes.Equal(append(append([]byte(nil), seg[0]...), seg[1]...), want))
		}
	}
}
