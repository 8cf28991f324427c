package wire

import (
	"bytes"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// slowMarshal is Marshal without the compiled encoder.
func slowMarshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	enc.SetOmitEmpty(true)
	if err := enc.Encode(v); err != nil {
		return nil, Wrap(CodeInternal, "body could not be encoded", err)
	}
	if err := Validate(buf.Bytes(), Limits{}); err != nil {
		return recanonicalize(buf.Bytes())
	}
	return buf.Bytes(), nil
}

func checkSameEnc(t *testing.T, v any) {
	t.Helper()
	fast, ferr := Marshal(v)
	slow, serr := slowMarshal(v)
	if (ferr == nil) != (serr == nil) || CodeOf(ferr) != CodeOf(serr) {
		t.Fatalf("%T: fast err %v, slow err %v", v, ferr, serr)
	}
	if !bytes.Equal(fast, slow) {
		t.Fatalf("%T %#v:\nfast %x\nslow %x", v, v, fast, slow)
	}
}

type appended struct{ b []byte }

func (a *appended) AppendCanonical(b []byte) ([]byte, error) { return AppendBin(b, a.b), nil }
func (a *appended) EncodeMsgpack(enc *msgpack.Encoder) error { return enc.EncodeBytes(a.b) }

type withAppender struct {
	Name string    `msgpack:"name"`
	V    *appended `msgpack:"v"`
}

type unsortedFields struct {
	B string `msgpack:"b"`
	A string `msgpack:"a"`
}

func TestMarshalFastMatchesSlow(t *testing.T) {
	t.Parallel()
	inner := &testInner{Count: 1}
	pp := &inner
	for _, v := range []any{
		testBody{}, &testBody{}, testInner{Name: "x"},
		testBody{Data: []byte{}, Env: map[string]string{"b": "1", "a": "2", "": "3"}, In: testInner{Count: 0}, Items: []testInner{{}, {Name: "n"}}, List: []string{"", "z"}, Opt: &testInner{}},
		fastBody{Bins: [][]byte{{}, []byte("x")}, I8: -128, M: map[fastNamed]uint32{"z": 1, "a": 1 << 31}, Nested: map[string][]string{"k": {}, "j": nil}, PP: pp, U: 1 << 63},
		fastBody{Bins: [][]byte{nil}},                      // nil bin in an array: not canonical
		testBody{Text: "\xff"},                             // invalid UTF-8: not canonical
		testBody{Items: []testInner{{Name: "a\xffb"}}},     // nested
		map[string]int64{"b": 1, "a": -1, "c": 1 << 40},    // unsorted map type
		map[string][]testInner{"x": nil},                   // nil slice value
		[]string{"a"}, []*testInner{nil}, (*testBody)(nil), // top-level non-maps and typed nil
		withAppender{Name: "n", V: &appended{b: []byte("v")}}, withAppender{},
		unsortedFields{B: "1", A: "2"}, // fields out of order: recanonicalized
		map[string]any{"x": 1, "a": []any{"y"}},
	} {
		checkSameEnc(t, v)
	}
}

// FuzzMarshalFastMatchesSlow encodes whatever the fuzzer's bodies decode
// to, both ways.
func FuzzMarshalFastMatchesSlow(f *testing.F) {
	f.Add(m("count", 3, "name", "x"))
	f.Add(m("bins", arr(bin([]byte{}), bin([]byte("ab"))), "i8", -5, "m", m("a", 1), "nested", m("k", arr(AppendStr(nil, "v"))), "pp", m("count", 1), "u", 7))
	f.Add(m("data", bin([]byte("hi")), "delta", -300, "env", m("A", "b"), "flag", AppendBool(nil, true), "in", m("count", 300), "items", arr(m("name", "n")),
		"list", arr(), "opt", m(), "port", 65535, "text", "t"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if Validate(data, Limits{}) != nil {
			return
		}
		var a testBody
		if Unmarshal(data, &a, false) == nil {
			checkSameEnc(t, a)
		}
		var b fastBody
		if Unmarshal(data, &b, false) == nil {
			checkSameEnc(t, b)
			checkSameEnc(t, &b)
		}
		var c map[string]testInner
		if Unmarshal(data, &c, false) == nil {
			checkSameEnc(t, c)
		}
	})
}
