package redact

import (
	"strings"
	"testing"
)

// FuzzScrub checks that Scrub never panics, that its output never contains
// a registered value (raw or encoded) and that it is idempotent.
func FuzzScrub(f *testing.F) {
	f.Add([]byte(canary), "echo "+canary+" done")
	f.Add([]byte("secretxyz"), "a secretxyzxyz D]xyz")
	f.Fuzz(func(t *testing.T, value []byte, text string) {
		s := NewScrubber()
		s.Register(value)
		s.Register([]byte("D]xyz"))
		for _, in := range []string{text, text + string(value) + text, string(value) + text} {
			out := s.Scrub(in)
			if s.Contains([]byte(out)) {
				t.Fatalf("Scrub(%q) = %q still matches", in, out)
			}
			if len(value) >= MinValueLen && s.load() != nil && strings.Contains(out, string(value)) &&
				!strings.Contains(Redacted, string(value)) {
				t.Fatalf("Scrub(%q) = %q contains the value", in, out)
			}
			if again := s.Scrub(out); again != out {
				t.Fatalf("not idempotent: %q then %q", out, again)
			}
			if string(s.ScrubBytes([]byte(in))) != out {
				t.Fatalf("ScrubBytes differs from Scrub")
			}
		}
	})
}

// FuzzString checks that String never panics, is idempotent and never
// grows text beyond the Redacted replacements it makes.
func FuzzString(f *testing.F) {
	for _, s := range []string{"password=hunter2", "Authorization: Bearer abc", "https://u:p@h", "x-API-Key: k", "PrIvAtE", "aut",
		`{"token": "a\"b"}`, "Basic dXNlcjpwdw==", "?access_token=x&a=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := String(in)
		if again := String(out); again != out {
			t.Fatalf("String not idempotent: %q → %q → %q", in, out, again)
		}
		// The fragment search (pair table, switch) is a plain search.
		if got, want := hasSensitiveFragment(in), naiveFragment(in); got != want {
			t.Fatalf("hasSensitiveFragment(%q) = %v, want %v", in, got, want)
		}
		// The prefilter may only skip text that the rules leave alone.
		if !mayNeedRedaction(in) {
			if r := redactKeyValues(redactUserinfo(redactAuthSchemes(in))); r != in {
				t.Fatalf("prefilter skipped %q, which the rules change to %q", in, r)
			}
		}
	})
}

// naiveFragment is hasSensitiveFragment by brute force: ASCII-lowercase s,
// then look for each fragment.
func naiveFragment(s string) bool {
	b := []byte(s)
	for i, c := range b {
		b[i] = lower(c)
	}
	for _, f := range sensitiveFragments {
		if strings.Contains(string(b), f) {
			return true
		}
	}
	return false
}
