package wire

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// slowUnmarshal is Unmarshal without the one-pass decoder: Conform, then
// the msgpack decoder.
func slowUnmarshal(body []byte, v any, strict bool) error {
	if err := Conform(body, v, strict); err != nil {
		return err
	}
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return Wrap(CodeFrameMalformed, "body does not match the op's schema", err)
	}
	return nil
}

type fastNamed string

type fastBody struct {
	Bins   [][]byte             `msgpack:"bins"`
	I8     int8                 `msgpack:"i8"`
	M      map[fastNamed]uint32 `msgpack:"m"`
	Nested map[string][]string  `msgpack:"nested"`
	PP     **testInner          `msgpack:"pp"`
	Skip   string               `msgpack:"-"`
	U      uint                 `msgpack:"u"`
	hidden int
}

// checkSame decodes data into a fresh T both ways and compares.
func checkSame[T any](t *testing.T, data []byte, strict bool) {
	t.Helper()
	if Validate(data, Limits{}) != nil {
		return
	}
	var fast, slow T
	ferr := Unmarshal(data, &fast, strict)
	serr := slowUnmarshal(data, &slow, strict)
	if (ferr == nil) != (serr == nil) {
		t.Fatalf("%T strict=%v: fast err %v, slow err %v", fast, strict, ferr, serr)
	}
	if ferr != nil {
		if CodeOf(ferr) != CodeOf(serr) || AsError(ferr).Msg != AsError(serr).Msg {
			t.Fatalf("%T: fast err %v, slow err %v", fast, ferr, serr)
		}
		var zero T
		if !reflect.DeepEqual(fast, zero) {
			t.Fatalf("%T: fast left a partial value on error", fast)
		}
		return
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%T strict=%v: fast %#v, slow %#v", fast, strict, fast, slow)
	}
}

// FuzzUnmarshalFastMatchesSlow checks that the one-pass decoder accepts,
// refuses (same code and message) and decodes exactly as Conform plus the
// msgpack decoder do.
func FuzzUnmarshalFastMatchesSlow(f *testing.F) {
	f.Add(m("count", 3, "name", "x"))
	f.Add(m("bins", arr(bin([]byte{}), bin([]byte("ab"))), "i8", -5, "m", m("a", 1), "nested", m("k", arr(AppendStr(nil, "v"))), "pp", m("count", 1), "u", 7))
	f.Add(m("data", bin([]byte("hi")), "delta", -300, "env", m("A", "b"), "flag", AppendBool(nil, true), "in", m("count", 300), "items", arr(m("name", "n")),
		"list", arr(), "opt", m(), "port", 65535, "text", "t", "zzz", 1))
	f.Add(m("i8", 200))
	f.Add(m("u", -1))
	f.Add(m("bins", arr(AppendStr(nil, "str"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, strict := range []bool{true, false} {
			checkSame[testBody](t, data, strict)
			checkSame[testInner](t, data, strict)
			checkSame[fastBody](t, data, strict)
			checkSame[map[string]testInner](t, data, strict)
		}
	})
}
