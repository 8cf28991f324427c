package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"
)

// minStableBase64 is the shortest misaligned base64 fragment registered:
// shorter fragments would match unrelated text too often.
const minStableBase64 = 8

// encodedForms returns every pattern that a Scrubber matches for value v:
//
//   - the raw bytes;
//   - url.QueryEscape and url.PathEscape forms, with upper- and lower-case
//     hex digits;
//   - base64 (RFC 4648) in the standard and URL alphabets, padded and not;
//   - every byte percent-encoded (%73%6B...), upper- and lower-case hex;
//   - hex, lower and upper case;
//   - the body of a JSON string (RFC 8259 section 7) as common encoders
//     write it: Go's encoding/json with and without HTML escaping (& < >
//     as \u0026 \u003c \u003e), each also with "/" written "\/" (PHP's
//     json_encode), and ASCII-only with every non-ASCII rune as \uXXXX
//     (Python's json.dumps, lower-case hex, UTF-16 surrogate pairs), so
//     that an echo inside a JSON document is found before a client
//     decodes it;
//   - for base64 inside a larger blob, where v starts at byte offset k
//     (mod 3) of the encoded data, the part of the encoding that depends
//     only on v's bytes, for k = 0, 1 and 2 and both alphabets, when it is at
//     least minStableBase64 characters long. The one or two characters at
//     each edge, which mix in neighbouring bytes, stay (they carry at most
//     a few bits of v).
func encodedForms(v []byte) []string {
	raw := string(v)
	forms := []string{raw}
	for _, e := range []string{url.QueryEscape(raw), url.PathEscape(raw)} {
		forms = append(forms, e, lowerPercentHex(e))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding,
		base64.URLEncoding, base64.RawURLEncoding} {
		forms = append(forms, enc.EncodeToString(v))
	}
	var all strings.Builder
	for _, c := range v {
		fmt.Fprintf(&all, "%%%02X", c)
	}
	forms = append(forms, all.String(), lowerPercentHex(all.String()))
	h := hex.EncodeToString(v)
	forms = append(forms, h, strings.ToUpper(h))
	forms = append(forms, jsonForms(raw)...)
	for k := range 3 {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if s := stableBase64(v, k, enc); len(s) >= minStableBase64 {
				forms = append(forms, s)
			}
		}
	}
	return dedupe(forms)
}

// jsonForms returns the bodies (no quotes) of raw as a JSON string in the
// encoders' styles encodedForms lists.
func jsonForms(raw string) []string {
	var forms []string
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(raw) != nil {
			continue
		}
		body := strings.TrimSuffix(strings.TrimSpace(b.String()), `"`)[1:]
		forms = append(forms, body, strings.ReplaceAll(body, "/", `\/`))
	}
	// ASCII-only: Go's form without HTML escaping, each non-ASCII rune as
	// \uXXXX (a surrogate pair above U+FFFF).
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(raw) == nil {
		body := strings.TrimSuffix(strings.TrimSpace(b.String()), `"`)[1:]
		var a strings.Builder
		for _, r := range body {
			switch {
			case r < utf8.RuneSelf:
				a.WriteRune(r)
			case r > 0xFFFF:
				r -= 0x10000
				fmt.Fprintf(&a, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
			default:
				fmt.Fprintf(&a, `\u%04x`, r)
			}
		}
		forms = append(forms, a.String())
	}
	return forms
}

// stableBase64 returns the characters of enc's encoding of v, placed at
// byte offset k of the encoded data, whose 6 bits all come from v.
func stableBase64(v []byte, k int, enc *base64.Encoding) string {
	buf := make([]byte, k+len(v))
	copy(buf[k:], v)
	s := enc.EncodeToString(buf)
	start := (8*k + 5) / 6
	end := 8 * (k + len(v)) / 6
	if end <= start {
		return ""
	}
	return s[start:end]
}

// lowerPercentHex lowers the hex digits of every %XX escape in s.
func lowerPercentHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lower(b[i+1]), lower(b[i+2])
			i += 2
		}
	}
	return string(b)
}

// dedupe returns forms without duplicates, in first-seen order.
func dedupe(forms []string) []string {
	seen := make(map[string]bool, len(forms))
	out := forms[:0]
	for _, f := range forms {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}
