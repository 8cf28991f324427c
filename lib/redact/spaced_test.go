package redact

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/matryer/is"
)

// spacedCanary is the held value of the bound tests: mixed case, so that
// the case rules are tested too.
const spacedCanary = "sk_CAN4RYx9ZqLp7TvW"

// sepHex writes v as hex pairs (upper case when upper) joined by sep,
// with bad, when not empty, between the pairs at index at and at+1.
func sepHex(v, sep string, upper bool, at int, bad string) string {
	h := hex.EncodeToString([]byte(v))
	if upper {
		h = strings.ToUpper(h)
	}
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			if bad != "" && i/2 == at+1 {
				b.WriteString(bad)
			} else {
				b.WriteString(sep)
			}
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

// interleave writes each character of form followed by gap (the last one
// by nothing), with wide instead of gap after the character at index at
// when wide is not empty.
func interleave(form, gap string, at int, wide string) string {
	var b strings.Builder
	for i := range len(form) {
		b.WriteByte(form[i])
		if i == len(form)-1 {
			break
		}
		if wide != "" && i == at {
			b.WriteString(wide)
		} else {
			b.WriteString(gap)
		}
	}
	return b.String()
}

// percentAll percent-encodes every byte of s.
func percentAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// percentSome percent-encodes every other byte of s: a mix no exact form
// lists.
func percentSome(s string) string {
	var b strings.Builder
	for i := range len(s) {
		if i%2 == 0 {
			fmt.Fprintf(&b, "%%%02x", s[i])
		} else {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// levels applies f to s n times.
func levels(s string, n int, f func(string) string) string {
	for range n {
		s = f(s)
	}
	return s
}

// TestDecodedBounds holds every form ContainsDecoded reads to its bound
// from both sides: a spelling just within it is found, one just past it
// is not (bounds.go).
func TestDecodedBounds(t *testing.T) {
	t.Parallel()
	v := spacedCanary
	s := NewScrubber()
	s.Register([]byte(v))
	zw := "\u200b"
	invisibles := []string{"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"}
	run := func(n int) string { return strings.Repeat(zw, n) }
	b64 := base64.StdEncoding.EncodeToString([]byte(v))
	h := hex.EncodeToString([]byte(v))
	softs := func(n int) string { return v[:5] + strings.Repeat("=\r\n", n) + v[5:] }
	tests := []struct {
		name, text string
		want       bool
	}{
		// Separated hex: each separator, up to MaxHexSeparators bytes,
		// either case.
		{"hex with ':'", sepHex(v, ":", false, 0, ""), true},
		{"hex with '-', upper", sepHex(v, "-", true, 0, ""), true},
		{"hex with '.'", sepHex(v, ".", false, 0, ""), true},
		{"hex with ' ' (a dump)", "0000: " + sepHex(v, " ", false, 0, "") + "  |....|", true},
		{"hex with mixed case", strings.Replace(sepHex(v, ":", false, 0, ""), "6b", "6B", 1), true},
		{"hex, some pairs joined", strings.Replace(sepHex(v, ":", false, 0, ""), ":", "", 3), true},
		{"hex, 3 separators", sepHex(v, " - ", false, 0, ""), true},
		{"hex, 3 separators once", sepHex(v, ":", false, 4, ":::"), true},
		{"hex, 4 separators once: past the bound", sepHex(v, ":", false, 4, "::::"), false},
		{"hex, a separator inside a pair", h[:1] + ":" + h[1:], false},
		{"hex of the value less a byte", sepHex(v[:len(v)-1], ":", false, 0, ""), false},
		// Invisible characters: up to MaxInvisibleRun between two
		// characters, in any form.
		{"one invisible after each character", interleave(v, zw, 0, ""), true},
		{"two after each character", interleave(v, run(2), 0, ""), true},
		{"mixed invisibles", interleave(v, "\u00ad\ufeff", 0, ""), true},
		{"invisibles in base64", interleave(b64, "\u2060", 0, ""), true},
		{"invisibles in separated hex", interleave(sepHex(v, ":", false, 0, ""), "\u200d", 0, ""), true},
		{"three once: past the bound", interleave(v, zw, 6, run(3)), false},
		{"percent-encoded invisibles", interleave(v, "%E2%80%8B", 0, ""), true},
		// Percent-encoding: MaxDecodeLevels levels of any mix; one more
		// when the innermost level is an exact form.
		{"mixed percent, 1 level", percentSome(v), true},
		{"mixed percent, 4 levels", levels(percentSome(v), 3, url.QueryEscape), true},
		{"mixed percent, 5 levels: past the bound", levels(percentSome(v), 4, url.QueryEscape), false},
		{"every byte, 5 levels", levels(v, 5, percentAll), true},
		{"every byte, 6 levels: past the bound", levels(v, 6, percentAll), false},
		// Line breaks: at most MaxLineBreak bytes between two characters.
		{"CRLF inside", v[:4] + "\r\n" + v[4:], true},
		{"LF LF inside", v[:4] + "\n\n" + v[4:], true},
		{"CR LF LF: past the bound", v[:4] + "\r\n\n" + v[4:], false},
		// Quoted-printable soft breaks: a level removes every other one
		// of a run, so MaxDecodeLevels levels remove 2^4-1.
		{"15 soft breaks", softs(15), true},
		{"16 soft breaks: past the bound", softs(16), false},
		// Numeric character references: at most MaxRefDigits decimal or
		// MaxRefHexDigits hex digits.
		{"decimal reference, 7 digits", strings.Replace(v, "_", "&#0000095;", 1), true},
		{"decimal reference, 8 digits: past the bound", strings.Replace(v, "_", "&#00000095;", 1), false},
		{"hex reference, 6 digits", strings.Replace(v, "_", "&#x00005F;", 1), true},
		{"hex reference, 7 digits: past the bound", strings.Replace(v, "_", "&#x000005F;", 1), false},
		// Text with none of it.
		{"a date, an address, prose", "2026-12-01 21:37:22 127.0.0.1 a bad cafe, deed 00:1a:2b:3c:4d:5e", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(s.ContainsDecoded([]byte(tt.text)), tt.want) // text
			if tt.want {
				is.True(len(tt.text) <= MaxDecodedSpan(len(v))) // within the declared span
			}
		})
	}
	for _, c := range invisibles {
		is.New(t).True(s.ContainsDecoded([]byte(interleave(v, c, 0, "")))) // each invisible character
	}
}

// TestSpans: the declared spans cover the widest exact form, and grow
// with the bounds they are made of.
func TestSpans(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for _, v := range []string{"abcd", spacedCanary, "\x00\x01\x1f\x7f"} {
		for _, f := range encodedForms([]byte(v)) {
			is.True(len(f) <= MaxSpan(len(v))) // every exact form within MaxSpan
		}
	}
	is.Equal(SpanSeparatedHex, 5)
	is.Equal(SpanGap, 8)
	is.True(MaxDecodedSpan(4) > MaxSpan(4)*(SpanEscape+SpanSoftBreak))
}

// naiveSeparatedHex is matcher.separatedHex by brute force: at every
// start, read hex pairs of each registered hex form, with 0 to
// MaxHexSeparators separators between pairs.
func naiveSeparatedHex(values []string, text string) bool {
	isSep := func(c byte) bool { return c == '-' || c == ':' || c == '.' || c == ' ' }
	for _, v := range values {
		h := hex.EncodeToString([]byte(v))
		for start := range len(text) {
			i, ok := start, true
			for p := 0; p < len(h) && ok; p += 2 {
				if p > 0 {
					n := 0
					for i < len(text) && isSep(text[i]) && n <= MaxHexSeparators {
						i, n = i+1, n+1
					}
					ok = n <= MaxHexSeparators
				}
				ok = ok && i+2 <= len(text) && lower(text[i]) == h[p] && lower(text[i+1]) == h[p+1]
				i += 2
			}
			if ok {
				return true
			}
		}
	}
	return false
}

// FuzzSeparatedHex compares the separated-hex search with brute force, on
// texts that hold the value's hex with fuzzed separators.
func FuzzSeparatedHex(f *testing.F) {
	f.Add([]byte("abcd"), "de:ad", uint8(1))
	f.Add([]byte(spacedCanary), " - ", uint8(3))
	f.Add([]byte("0000"), "::::", uint8(0))
	f.Fuzz(func(t *testing.T, value []byte, seps string, at uint8) {
		if len(value) < MinValueLen || len(value) > 32 || len(seps) > 8 {
			return
		}
		s := NewScrubber()
		s.Register(value)
		m := s.load()
		if m == nil {
			return
		}
		h := hex.EncodeToString(value)
		cut := 2 * (int(at) % len(value))
		for _, text := range []string{h[:cut] + seps + h[cut:], seps + h, "x" + h[:cut] + seps + strings.ToUpper(h[cut:]) + seps} {
			// Hex without any separator is Contains's (an exact form). Only
			// the hex form is compared: the search may also find another
			// form of the value (raw, base64) between pairs.
			got, want := m.separatedHex([]byte(text)), naiveSeparatedHex([]string{string(value)}, text)
			if want && !got && !m.contains([]byte(strings.ToLower(text))) {
				t.Fatalf("separatedHex(%q) missed the value %q", text, value)
			}
			if got && !want && !strings.ContainsAny(seps, "-:. ") {
				t.Fatalf("separatedHex(%q) = true without a separator", text)
			}
		}
	})
}

// FuzzStripInvisible: stripping never grows text, reports what it did,
// and keeps every visible character in order.
func FuzzStripInvisible(f *testing.F) {
	for _, seed := range []string{"a\u200bb", "\u200b\u200b\u200b", "\u00ad", "\xe2\x80", "x\ufeff\u2060y", "\xc2"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, removed := stripInvisible(b)
		if len(out) > len(b) || removed != (len(out) < len(b)) {
			t.Fatalf("stripInvisible(%q) = %q, %v", b, out, removed)
		}
		visible := func(p []byte) []byte {
			var v []byte
			for i := 0; i < len(p); {
				if n := invisibleAt(p[i:]); n > 0 {
					i += n
					continue
				}
				v = append(v, p[i])
				i++
			}
			return v
		}
		// In valid UTF-8 only whole characters go, so every visible one
		// stays (in invalid text, removing one may join stray bytes).
		if utf8.Valid(b) && string(visible(out)) != string(visible(b)) {
			t.Fatalf("stripInvisible(%q) changed the visible bytes: %q", b, out)
		}
	})
}

// FuzzContainsDecoded: ContainsDecoded never panics and finds the value
// inserted whole in any text that adds nothing adjacent to it that a view
// could join with it.
func FuzzContainsDecoded(f *testing.F) {
	for _, seed := range []string{"", "%41%2541", "a\u200b=\r\n&#x41;", "de:ad be-ef", "\\u0041+%20", "&#00000041;"} {
		f.Add(seed)
	}
	s := NewScrubber()
	s.Register([]byte(spacedCanary))
	f.Fuzz(func(t *testing.T, text string) {
		_ = s.ContainsDecoded([]byte(text))
		for _, form := range []string{sepHex(spacedCanary, ":", false, 0, ""), interleave(spacedCanary, "\u200b", 0, "")} {
			if !s.ContainsDecoded([]byte(text + " " + form + " " + text)) {
				t.Fatalf("ContainsDecoded missed %q between %q", form, text)
			}
		}
	})
}
