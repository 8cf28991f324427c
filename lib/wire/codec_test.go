package wire

import (
	"encoding/hex"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/vmihailenco/msgpack/v5"
)

type testInner struct {
	Count uint8  `msgpack:"count,omitempty"`
	Name  string `msgpack:"name,omitempty"`
}

// testBody is a representative op body: every kind the wire carries.
type testBody struct {
	Data  []byte            `msgpack:"data,omitempty"`
	Delta int64             `msgpack:"delta,omitempty"`
	Env   map[string]string `msgpack:"env,omitempty"`
	Flag  bool              `msgpack:"flag,omitempty"`
	In    testInner         `msgpack:"in,omitempty"`
	Items []testInner       `msgpack:"items,omitempty"`
	List  []string          `msgpack:"list,omitempty"`
	Opt   *testInner        `msgpack:"opt,omitempty"`
	Port  uint16            `msgpack:"port,omitempty"`
	Text  string            `msgpack:"text,omitempty"`
}

func TestMarshal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   any
		want []byte
	}{
		{name: "nil is the absent body", in: nil, want: nil},
		{name: "zero struct", in: testBody{}, want: m()},
		{name: "zero struct pointer", in: &testBody{}, want: m()},
		{name: "zero fields without omitempty are omitted too", in: struct {
			A int    `msgpack:"a"`
			B string `msgpack:"b"`
			C bool   `msgpack:"c"`
		}{}, want: m()},
		{name: "bytes are bin, text is str", in: testBody{Data: []byte("hi"), Text: "hi"}, want: m("data", bin([]byte("hi")), "text", "hi")},
		{name: "empty bytes, list and map are omitted", in: testBody{Data: []byte{}, List: []string{}, Env: map[string]string{}}, want: m()},
		{name: "negative fixint", in: testBody{Delta: -1}, want: m("delta", mustHex("ff"))},
		{name: "negative int8", in: testBody{Delta: -33}, want: m("delta", mustHex("d0df"))},
		{name: "negative int16", in: testBody{Delta: -129}, want: m("delta", mustHex("d1ff7f"))},
		{name: "negative int32", in: testBody{Delta: -32769}, want: m("delta", mustHex("d2ffff7fff"))},
		{name: "negative int64", in: testBody{Delta: math.MinInt64}, want: m("delta", mustHex("d38000000000000000"))},
		{name: "positive int64 uses uint forms", in: testBody{Delta: 200}, want: m("delta", mustHex("ccc8"))},
		{name: "large positive int64", in: testBody{Delta: 1 << 40}, want: m("delta", mustHex("cf0000010000000000"))},
		{name: "uint16 shortest", in: testBody{Port: 5}, want: m("port", 5)},
		{name: "nested struct", in: testBody{In: testInner{Count: 200, Name: "n"}}, want: m("in", m("count", mustHex("ccc8"), "name", "n"))},
		{name: "nested struct, zero field omitted", in: testBody{In: testInner{Name: "n"}}, want: m("in", m("name", "n"))},
		{name: "nested pointer", in: testBody{Opt: &testInner{Count: 1}}, want: m("opt", m("count", 1))},
		{name: "list of structs", in: testBody{Items: []testInner{{Name: "a"}, {}}}, want: m("items", arr(m("name", "a"), m()))},
		{name: "map keys sorted", in: testBody{Env: map[string]string{"b": "2", "a": "1", "B": "0"}}, want: m("env", m("B", "0", "a", "1", "b", "2"))},
		{name: "free-form map keeps zero values", in: map[string]any{"z": 0, "a": "", "m": false}, want: m("a", "", "m", mustHex("c2"), "z", 0)},
		{name: "every field", in: fullBody, want: fullBodyWire},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := Marshal(tc.in)
			is.NoErr(err)
			is.Equal(hex.EncodeToString(got), hex.EncodeToString(tc.want))
		})
	}
}

var fullBody = testBody{
	Data: []byte{0, 0xff}, Delta: -5, Env: map[string]string{"HOME": "/h"}, Flag: true,
	In: testInner{Count: 255, Name: "in"}, Items: []testInner{{Count: 1}}, List: []string{"a", "b"},
	Opt: &testInner{Name: "o"}, Port: 65535, Text: "t",
}

var fullBodyWire = m(
	"data", bin([]byte{0, 0xff}), "delta", -5, "env", m("HOME", "/h"), "flag", mustHex("c3"),
	"in", m("count", 255, "name", "in"), "items", arr(m("count", 1)), "list", arr(str("a"), str("b")),
	"opt", m("name", "o"), "port", 65535, "text", "t",
)

func TestMarshalRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   any
	}{
		{name: "float", in: struct {
			F float64 `msgpack:"f"`
		}{F: 1.5}},
		{name: "non-string map keys", in: map[int]string{1: "a"}},
		{name: "time.Time is an ext type", in: struct {
			T time.Time `msgpack:"t"`
		}{T: time.Unix(1, 0)}},
		{name: "nil in a map", in: map[string]any{"a": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := Marshal(tc.in)
			is.True(err != nil)
			is.Equal(CodeOf(err), CodeInternal) // a bug on our side, not the peer's
			is.True(got == nil)
		})
	}
}

type schemaNode struct {
	Kids []schemaNode `msgpack:"kids"`
	Next *schemaNode  `msgpack:"next"`
}

func TestCheckSchema(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   any
		ok   bool
		msg  string
	}{
		{name: "representative body", in: testBody{}, ok: true},
		{name: "pointer", in: &testBody{}, ok: true},
		{name: "stream frame", in: StreamFrame{}, ok: true},
		{name: "recursive type", in: schemaNode{}, ok: true},
		{name: "raw message field", in: struct {
			R msgpack.RawMessage `msgpack:"r"`
		}{}, ok: true},
		{name: "skipped and unexported fields", in: struct {
			A    int `msgpack:"a"`
			Skip int `msgpack:"-"`
			c    int
			B    int `msgpack:"b"`
		}{c: 0}, ok: true},
		{name: "unsorted tags", in: struct {
			B int `msgpack:"b"`
			A int `msgpack:"a"`
		}{}, msg: "bytewise order"},
		{name: "unsorted: length-first is not bytewise", in: struct {
			B  int `msgpack:"b"`
			AA int `msgpack:"aa"`
		}{}, msg: "bytewise order"},
		{name: "unsorted in a nested struct", in: struct {
			In struct {
				Z int `msgpack:"z"`
				Y int `msgpack:"y"`
			} `msgpack:"in"`
		}{}, msg: "bytewise order"},
		{name: "missing tag", in: struct {
			A int
		}{}, msg: "no msgpack tag"},
		{name: "empty tag name", in: struct {
			A int `msgpack:",omitempty"`
		}{}, msg: "no msgpack tag"},
		{name: "float64", in: struct {
			F float64 `msgpack:"f"`
		}{}, msg: "float"},
		{name: "float32 in a slice", in: struct {
			F []float32 `msgpack:"f"`
		}{}, msg: "float"},
		{name: "float in a map", in: struct {
			F map[string]float64 `msgpack:"f"`
		}{}, msg: "float"},
		{name: "float behind a pointer in a list", in: struct {
			L []*struct {
				F float64 `msgpack:"f"`
			} `msgpack:"l"`
		}{}, msg: "float"},
		{name: "complex", in: struct {
			C complex128 `msgpack:"c"`
		}{}, msg: "float"},
		{name: "int map keys", in: struct {
			M map[int]string `msgpack:"m"`
		}{}, msg: "map keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			err := CheckSchema(tc.in)
			if tc.ok {
				is.NoErr(err)
				return
			}
			is.True(err != nil)
			is.Equal(CodeOf(err), CodeInternal)
			is.True(strings.Contains(err.Error(), tc.msg))
		})
	}
}

func TestUnmarshalRoundTrip(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	enc, err := Marshal(fullBody)
	is.NoErr(err)
	var got testBody
	is.NoErr(Unmarshal(enc, &got, true))
	is.Equal(got, fullBody)

	var zero testBody
	is.NoErr(Unmarshal(nil, &zero, true)) // the absent body leaves the zero value
	is.Equal(zero, testBody{})
	is.NoErr(Unmarshal(m(), &zero, true))
	is.Equal(zero, testBody{})

	// Explicit zero values decode the same as absent ones.
	var explicit testBody
	is.NoErr(Unmarshal(m("delta", 0, "flag", mustHex("c2"), "port", 0, "text", ""), &explicit, true))
	is.Equal(explicit, testBody{})
}

func TestUnmarshal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		in     []byte
		strict bool
		code   string // "" = accepted
		path   string // the field path the message names
		want   testBody
	}{
		{name: "strict: unknown top-level field", in: m("text", "t", "zz", 1), strict: true, code: CodeRequestUnknownField, path: "body.zz"},
		{name: "strict: unknown field sorted first", in: m("aa", 1), strict: true, code: CodeRequestUnknownField, path: "body.aa"},
		{name: "strict: unknown nested field", in: m("in", m("name", "n", "zz", 1)), strict: true, code: CodeRequestUnknownField, path: "body.in.zz"},
		{name: "strict: unknown field behind a pointer", in: m("opt", m("x", 1)), strict: true, code: CodeRequestUnknownField, path: "body.opt.x"},
		{name: "strict: unknown field in a list element", in: m("items", arr(m(), m("q", 1))), strict: true, code: CodeRequestUnknownField, path: "body.items[1].q"},
		{name: "lenient: unknown fields ignored", in: m("aa", arr(m("x", 1)), "in", m("name", "n", "zz", m()), "text", "t", "zz", 1), want: testBody{In: testInner{Name: "n"}, Text: "t"}},

		{name: "str where bin expected", in: m("data", "x"), strict: true, code: CodeFrameMalformed, path: "body.data"},
		{name: "bin where str expected", in: m("text", bin([]byte("x"))), strict: true, code: CodeFrameMalformed, path: "body.text"},
		{name: "lenient: bin where str expected", in: m("text", bin([]byte("x"))), code: CodeFrameMalformed, path: "body.text"},
		{name: "negative number into uint16", in: m("port", -1), strict: true, code: CodeFrameMalformed, path: "body.port"},
		{name: "overflow into uint16", in: m("port", 65536), strict: true, code: CodeFrameMalformed, path: "body.port"},
		{name: "overflow into uint8", in: m("in", m("count", 256)), strict: true, code: CodeFrameMalformed, path: "body.in.count"},
		{name: "uint8 at its max", in: m("in", m("count", 255)), strict: true, want: testBody{In: testInner{Count: 255}}},
		{name: "uint64 over int64 into int64", in: m("delta", AppendUint(nil, 1<<63)), strict: true, code: CodeFrameMalformed, path: "body.delta"},
		{name: "int64 min", in: m("delta", int64(math.MinInt64)), strict: true, want: testBody{Delta: math.MinInt64}},
		{name: "array where map expected", in: m("in", arr()), strict: true, code: CodeFrameMalformed, path: "body.in"},
		{name: "array where a map field expected", in: m("env", arr(str("a"))), strict: true, code: CodeFrameMalformed, path: "body.env"},
		{name: "map where array expected", in: m("list", m()), strict: true, code: CodeFrameMalformed, path: "body.list"},
		{name: "wrong element in a list", in: m("list", arr(str("a"), uintv(1))), strict: true, code: CodeFrameMalformed, path: "body.list[1]"},
		{name: "wrong value in a map", in: m("env", m("k", 1)), strict: true, code: CodeFrameMalformed, path: "body.env.k"},
		{name: "int where bool expected", in: m("flag", 1), strict: true, code: CodeFrameMalformed, path: "body.flag"},
		{name: "str where int expected", in: m("delta", "5"), strict: true, code: CodeFrameMalformed, path: "body.delta"},
		{name: "top level is an array", in: arr(), strict: true, code: CodeFrameMalformed, path: "body"},
		{name: "top level is a str", in: str("x"), strict: true, code: CodeFrameMalformed, path: "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.NoErr(Validate(tc.in, Limits{})) // Unmarshal takes validated bodies
			var got testBody
			err := Unmarshal(tc.in, &got, tc.strict)
			if tc.code == "" {
				is.NoErr(err)
				is.Equal(got, tc.want)
				return
			}
			is.Equal(CodeOf(err), tc.code)
			is.True(strings.Contains(err.Error(), tc.path+" ") || strings.HasSuffix(err.Error(), tc.path))
		})
	}
}

func TestUnmarshalMessageNamesNoValue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var got testBody
	err := Unmarshal(m("text", bin([]byte("hunter2-secret"))), &got, true)
	is.Equal(CodeOf(err), CodeFrameMalformed)
	is.True(!strings.Contains(err.Error(), "hunter2"))
}

func TestUnmarshalIntoMapAndAny(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var mm map[string]any
	is.NoErr(Unmarshal(m("a", 1, "b", arr(str("x"))), &mm, true))
	is.Equal(len(mm), 2)
	var raw struct {
		A any                `msgpack:"a"`
		R msgpack.RawMessage `msgpack:"r"`
	}
	is.NoErr(Unmarshal(m("a", m("deep", arr()), "r", bin([]byte{1})), &raw, true))
	is.Equal([]byte(raw.R), bin([]byte{1}))
	is.Equal(CodeOf(Unmarshal(m("a", 1), testBody{}, true)), CodeInternal) // not a pointer
}

func TestDecodeBodyValidatesFirst(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var got testBody
	is.Equal(CodeOf(DecodeBody(mustHex("81 a4 74657874 d9 01 74"), &got, true)), CodeFrameMalformed) // str8 for 1 byte
	is.Equal(CodeOf(DecodeBody(mustHex("dd ffffffff"), &got, true)), CodeFrameMalformed)
	is.NoErr(DecodeBody(nil, &got, true))
	is.NoErr(DecodeBody(m("text", "ok"), &got, true))
	is.Equal(got.Text, "ok")
}

func TestStreamFrames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    StreamFrame
		want []byte
		ends bool
	}{
		{name: "data", f: StreamFrame{T: StreamData, B: []byte("hi\x00")}, want: m("b", bin([]byte("hi\x00")), "t", "data")},
		{name: "data, empty", f: StreamFrame{T: StreamData}, want: m("t", "data")},
		{name: "resize", f: StreamFrame{T: StreamResize, Rows: 50, Cols: 200}, want: m("cols", mustHex("ccc8"), "rows", 50, "t", "resize")},
		{name: "resize, max", f: StreamFrame{T: StreamResize, Rows: 65535, Cols: 65535}, want: m("cols", 65535, "rows", 65535, "t", "resize")},
		{name: "eof", f: StreamFrame{T: StreamEOF}, want: mustHex("81 a174 a3656f66")},
		{name: "detach", f: StreamFrame{T: StreamDetach}, want: m("t", "detach"), ends: true},
		{name: "exit 0 omits status", f: StreamFrame{T: StreamExit}, want: m("t", "exit"), ends: true},
		{name: "exit 137", f: StreamFrame{T: StreamExit, Status: 137}, want: m("status", 137, "t", "exit"), ends: true},
		{name: "exit negative", f: StreamFrame{T: StreamExit, Status: -1}, want: m("status", -1, "t", "exit"), ends: true},
		{name: "error", f: StreamFrame{T: StreamError, Code: CodeStreamClosed, Msg: "closed"}, want: m("code", CodeStreamClosed, "msg", "closed", "t", "error"), ends: true},
		// {h: [{name: "X-Sum", value: "ok"}], t: "trailers"}, byte by byte.
		{name: "trailers", f: StreamFrame{T: StreamTrailers, H: []HeaderField{{Name: "X-Sum", Value: "ok"}}},
			want: mustHex("82 a168 91 82 a46e616d65 a5582d53756d a576616c7565 a26f6b a174 a8747261696c657273")},
		// An empty value is an absent key: {name: "X-Empty"}.
		{name: "trailers, empty value", f: StreamFrame{T: StreamTrailers, H: []HeaderField{{Name: "X-Empty"}}},
			want: mustHex("82 a168 91 81 a46e616d65 a7582d456d707479 a174 a8747261696c657273")},
		{name: "trailers, repeats in order", f: StreamFrame{T: StreamTrailers, H: []HeaderField{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}, {Name: "B", Value: "1"}}},
			want: m("h", arr(m("name", "B", "value", "2"), m("name", "A", "value", "1"), m("name", "B", "value", "1")), "t", "trailers")},
		{name: "trailers, none", f: StreamFrame{T: StreamTrailers}, want: mustHex("81 a174 a8747261696c657273")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			enc, err := Marshal(tc.f)
			is.NoErr(err)
			is.Equal(hex.EncodeToString(enc), hex.EncodeToString(tc.want))
			got, err := DecodeStreamFrame(enc)
			is.NoErr(err)
			is.Equal(*got, tc.f)
			is.Equal(got.Ends(), tc.ends)
		})
	}
}

func TestDecodeStreamFrameRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   []byte
		code string
	}{
		{name: "unknown t", in: m("t", "bogus"), code: CodeFrameMalformed},
		{name: "t in another case", in: m("t", "DATA"), code: CodeFrameMalformed},
		{name: "missing t", in: m("b", bin([]byte("x"))), code: CodeFrameMalformed},
		{name: "empty t", in: m("t", ""), code: CodeFrameMalformed},
		{name: "empty payload", in: nil, code: CodeFrameMalformed},
		{name: "unknown field", in: m("t", "eof", "x", 1), code: CodeRequestUnknownField},
		{name: "t as bin", in: m("t", bin([]byte("eof"))), code: CodeFrameMalformed},
		{name: "b as str", in: m("b", "x", "t", "data"), code: CodeFrameMalformed},
		{name: "rows over uint16", in: m("rows", 65536, "t", "resize"), code: CodeFrameMalformed},
		{name: "negative cols", in: m("cols", -1, "t", "resize"), code: CodeFrameMalformed},
		{name: "non-canonical", in: mustHex("81 a174 d9 03 656f66"), code: CodeFrameMalformed},
		{name: "not a map", in: arr(str("t")), code: CodeFrameMalformed},
		{name: "trailers: h as a map", in: m("h", m("name", "a"), "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: h as str", in: m("h", "a: b", "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: entry as str", in: m("h", arr(str("a")), "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: name as bin", in: m("h", arr(m("name", bin([]byte("a")))), "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: value as int", in: m("h", arr(m("name", "a", "value", 1)), "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: value as bin", in: m("h", arr(m("name", "a", "value", bin([]byte("v")))), "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: entry without name", in: m("h", arr(m("value", "v")), "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: empty entry", in: m("h", arr(m()), "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: unknown entry field", in: m("h", arr(m("name", "a", "zz", 1)), "t", "trailers"), code: CodeRequestUnknownField},
		{name: "trailers: entry keys unsorted", in: mustHex("82 a168 91 82 a576616c7565 a176 a46e616d65 a16e a174 a8747261696c657273"), code: CodeFrameMalformed},
		{name: "trailers: with b", in: m("b", bin([]byte("x")), "h", arr(m("name", "a")), "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: with code", in: m("code", "x.y", "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: with status", in: m("status", 1, "t", "trailers"), code: CodeFrameMalformed},
		{name: "trailers: unknown field", in: m("t", "trailers", "x", 1), code: CodeRequestUnknownField},
		{name: "trailers: t in another case", in: m("t", "Trailers"), code: CodeFrameMalformed},
		{name: "h on data", in: m("b", bin([]byte("x")), "h", arr(m("name", "a")), "t", "data"), code: CodeFrameMalformed},
		{name: "h on eof", in: m("h", arr(m("name", "a")), "t", "eof"), code: CodeFrameMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := DecodeStreamFrame(tc.in)
			is.Equal(CodeOf(err), tc.code)
			is.True(got == nil)
		})
	}
}
