package wire

import (
	"testing"

	"github.com/matryer/is"
)

// Maps whose values are not interfaces or strings are not sorted by the
// msgpack library; Marshal must still produce the canonical form, every
// time (Go's map order is random).
func TestMarshalSortsEveryMapType(t *testing.T) {
	t.Parallel()
	type S struct {
		Counts map[string]int64  `msgpack:"counts"`
		Names  map[string][]byte `msgpack:"names"`
	}
	v := S{Counts: map[string]int64{"zeta": 1, "alpha": 2, "mid": 3, "beta": 4}, Names: map[string][]byte{"b": {1}, "a": {2}}}
	is := is.New(t)
	first, err := Marshal(v)
	is.NoErr(err)
	for i := 0; i < 50; i++ {
		got, err := Marshal(v)
		is.NoErr(err)
		is.Equal(got, first) // one spelling per value
	}
	var back S
	is.NoErr(DecodeBody(first, &back, true))
	is.Equal(back.Counts["beta"], int64(4))
	is.Equal(back.Names["a"], []byte{2})
}

// A struct whose fields are out of tag order still encodes canonically
// (CheckSchema flags it in the api packages' tests, because the fallback
// costs a second encoding).
func TestMarshalReordersStructFields(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	got, err := Marshal(struct {
		B int `msgpack:"b"`
		A int `msgpack:"a"`
	}{A: 1, B: 2})
	is.NoErr(err)
	is.Equal(got, []byte{0x82, 0xa1, 'a', 0x01, 0xa1, 'b', 0x02})
}
