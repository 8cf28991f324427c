package redact

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
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
//   - hex, lower and upper case;
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
	h := hex.EncodeToString(v)
	forms = append(forms, h, strings.ToUpper(h))
	for k := range 3 {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if s := stableBase64(v, k, enc); len(s) >= minStableBase64 {
				forms = append(forms, s)
			}
		}
	}
	return dedupe(forms)
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
