package codec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestParseStrict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		ok       bool
	}{
		{"object", `{"a": [1, -2.5e+3, "x", true, false, null, {}], "b": {"c": []}}`, true},
		{"escapes", `"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"`, true},
		{"surrounding space", " \t\r\n{} \n", true},
		{"zero", `0`, true},
		{"empty", ``, false},
		{"space", `  `, false},
		{"bare word", `nul`, false},
		{"literal junk", `nullx`, false},
		{"leading zero", `01`, false},
		{"plus", `+1`, false},
		{"dot", `1.`, false},
		{"exponent", `1e`, false},
		{"hex", `0x1`, false},
		{"NaN", `NaN`, false},
		{"single quotes", `'a'`, false},
		{"unquoted key", `{a: 1}`, false},
		{"trailing comma object", `{"a": 1,}`, false},
		{"trailing comma array", `[1,]`, false},
		{"missing comma", `[1 2]`, false},
		{"missing colon", `{"a" 1}`, false},
		{"control character", "\"a\x01\"", false},
		{"raw newline in string", "\"a\nb\"", false},
		{"bad escape", `"\x41"`, false},
		{"short unicode escape", `"\u00e"`, false},
		{"lone high surrogate", `"\ud83d"`, false},
		{"lone low surrogate", `"\ude00"`, false},
		{"reversed surrogates", `"\ude00\ud83d"`, false},
		{"unterminated string", `"abc`, false},
		{"unclosed object", `{"a": 1`, false},
		{"unclosed array", `[1, 2`, false},
		{"stray close", `}`, false},
		{"two values", `1 2`, false},
		{"duplicate key", `{"a": 1, "a": 2}`, false},
		{"duplicate key deep", `[{"x": {"a": 1, "b": 2, "a": 3}}]`, false},
		{"duplicate key by escape", `{"a": 1, "\u0061": 2}`, false},
		{"same key in sibling objects", `[{"a": 1}, {"a": 2}]`, true},
		{"comment", `{} // x`, false},
		{"bom", "\ufeff{}", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse("test", []byte(tc.in), 1<<20)
			if tc.ok {
				is.New(t).NoErr(err)
			} else {
				wantCode(t, err, CodeDecode)
			}
		})
	}
	t.Run("depth", func(t *testing.T) {
		is := is.New(t)
		ok := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
		_, err := parse("test", []byte(ok), 1<<20)
		is.NoErr(err)
		_, err = parse("test", []byte("["+ok+"]"), 1<<20)
		wantCode(t, err, CodeDecode)
	})
	t.Run("messages name the path, not values", func(t *testing.T) {
		is := is.New(t)
		_, err := parse("test", []byte(`{"data": {"secret-value-123": 1, "secret-value-123": 2}}`), 1<<20)
		is.True(strings.Contains(err.Error(), `$["data"]["secret-value-123"]: duplicate key`))
		_, err = parse("test", []byte(`{"a": "hunter2" x}`), 1<<20)
		is.True(!strings.Contains(err.Error(), "hunter2"))
	})
}

// FuzzParse checks the strict parser against encoding/json: whatever it
// accepts, encoding/json accepts and decodes to the same tree; whatever
// encoding/json refuses, it refuses.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e+3,"x\u00e9",true,false,null,{}]}`, `{"a":1,"a":2}`, `"\ud83d\ude00"`,
		`[1,]`, ` 0 `, `{"a":{"b":{"c":[[[]]]}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parse("fuzz", b, 1<<20)
		if !json.Valid(b) {
			if err == nil {
				t.Fatalf("accepted invalid JSON %q", b)
			}
			return
		}
		if err != nil {
			msg := err.Error()
			for _, why := range []string{"duplicate key", "nested deeper", "surrogate", "UTF-8"} {
				if strings.Contains(msg, why) {
					return
				}
			}
			t.Fatalf("refused valid JSON %q: %v", b, err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalize(v), normalize(want)) {
			t.Fatalf("parse %q: got %#v, encoding/json %#v", b, v, want)
		}
	})
}

// normalize maps encoding/json's map[string]interface{} and []interface{}
// to the parser's types (they are the same types; this only guards nil vs
// empty).
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}
