package inject

import (
	"encoding/json"
	"testing"
)

// FuzzBody checks the JSON-pointer injector: whatever the body and pointer,
// it never panics, and on success the result is valid JSON in which the
// pointer reads the injected string. Seeds live in testdata/fuzz/FuzzBody.
func FuzzBody(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,2]}}`), "/a/b/1", []byte("v"))
	f.Add([]byte(`{"a":1,"a":2}`), "/a", []byte("v"))
	f.Fuzz(func(t *testing.T, body []byte, ptr string, value []byte) {
		out, err := Body(body, ptr, value)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON out: %q", out)
		}
		root, err := parseJSON(out)
		if err != nil {
			t.Fatalf("result does not re-parse: %v", err)
		}
		toks, _ := parsePointer(ptr)
		n := root
		for _, tok := range toks {
			if n = child(n, tok); n == nil {
				t.Fatalf("pointer %q does not resolve in %q", ptr, out)
			}
		}
		var s string
		if err := json.Unmarshal(n.raw, &s); err != nil || s != string(value) {
			t.Fatalf("pointer %q reads %q, want %q", ptr, n.raw, value)
		}
	})
}
