// Package redact keeps secret material out of logs, error messages and audit
// records. It has four layers:
//
//   - a policy: IsSensitiveKey names keys whose values are secret, and String
//     redacts well-known secret shapes in free text (key=value pairs, HTTP
//     Authorization schemes, URL userinfo, sensitive query parameters);
//   - Scrubber, which removes registered secret values and their common
//     encodings (percent, base64, hex) from any text, and finds the forms
//     it cannot remove (ContainsDecoded); Stream and Detector do both on
//     a body that arrives in pieces, holding back only what may still
//     begin a value and agreeing with the buffered methods on every
//     split;
//   - Secret, a holder for raw material that never prints, marshals or logs
//     its contents;
//   - NewHandler, an slog.Handler that applies the policy and a Scrubber to
//     every record as a backstop.
//
// KeyCache remembers the policy's and a Scrubber's verdict on keys that
// repeat from record to record, for writers such as the handler and
// lib/audit.
//
// Placeholders (`hkp_` + 32 lowercase base32 characters) are not secrets and
// are left as they are.
package redact

import "strings"

// Redacted replaces every redacted value.
const Redacted = "[REDACTED]"

// Codes lists the error codes this package returns, sorted; it returns none.
var Codes = []string{}

// sensitiveFragments are matched case-insensitively anywhere in a key.
var sensitiveFragments = []string{
	"apikey", "auth", "cookie", "credential", "key", "passwd", "password",
	"private", "secret", "token",
}

// fingerprintSuffix marks keys whose values are fingerprints, never secrets.
const fingerprintSuffix = "_fp"

// IsSensitiveKey reports whether a value stored under key must be redacted:
// key contains, in any case, one of token, password, passwd, secret,
// credential, auth, key, cookie, apikey or private. A key ending in "_fp"
// (a fingerprint, e.g. "token_fp") is never sensitive.
func IsSensitiveKey(key string) bool {
	if len(key) >= len(fingerprintSuffix) &&
		strings.EqualFold(key[len(key)-len(fingerprintSuffix):], fingerprintSuffix) {
		return false
	}
	return hasSensitiveFragment(key)
}

// hasSensitiveFragment reports whether s contains, in any ASCII case, one
// of sensitiveFragments. It looks at each byte once (switching on the
// fragments' first letters) instead of scanning s once per fragment, and
// never allocates. TestSensitiveFragmentsSwitch keeps the switch and
// sensitiveFragments in step.
//
// A position is looked at only if its two bytes can start a fragment
// (fragmentPairs), which few positions of ordinary text can.
func hasSensitiveFragment(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		next := fragmentPairs[s[i]]
		if next == 0 {
			continue
		}
		if c := s[i+1] | 0x20; c < 'a' || c > 'z' || next&(1<<(c-'a')) == 0 {
			continue // ASCII letters to lower case; no other byte becomes a letter
		}
		t := s[i:]
		switch s[i] | 0x20 {
		case 'a':
			if hasPrefixFold(t, "auth") || hasPrefixFold(t, "apikey") {
				return true
			}
		case 'c':
			if hasPrefixFold(t, "cookie") || hasPrefixFold(t, "credential") {
				return true
			}
		case 'k':
			if hasPrefixFold(t, "key") {
				return true
			}
		case 'p':
			if hasPrefixFold(t, "passwd") || hasPrefixFold(t, "password") || hasPrefixFold(t, "private") {
				return true
			}
		case 's':
			if hasPrefixFold(t, "secret") {
				return true
			}
		case 't':
			if hasPrefixFold(t, "token") {
				return true
			}
		}
	}
	return false
}

// fragmentPairs maps a byte that starts a sensitive fragment (in either
// case) to the set of second letters (bit c-'a', lower case) that follow
// it in one: every fragment is at least 2 letters long.
var fragmentPairs = func() (t [256]uint32) {
	for _, f := range sensitiveFragments {
		bit := uint32(1) << (f[1] - 'a')
		t[f[0]] |= bit
		t[f[0]-'a'+'A'] |= bit
	}
	return t
}()

// hasPrefixFold reports whether s starts with prefix (lowercase ASCII),
// ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for j := 0; j < len(prefix); j++ {
		if lower(s[j]) != prefix[j] {
			return false
		}
	}
	return true
}

// isPlaceholder reports whether v is exactly a hostkit placeholder:
// "hkp_" followed by 32 lowercase base32 (RFC 4648) characters.
func isPlaceholder(v string) bool {
	if len(v) != 36 || v[:4] != "hkp_" {
		return false
	}
	for i := 4; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// lower folds an ASCII letter to lower case.
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// indexFold returns the index of the first occurrence at or after from of
// sub (lowercase ASCII) in s, ignoring ASCII case, or -1. It never allocates.
func indexFold(s, sub string, from int) int {
	n := len(sub)
outer:
	for i := from; i+n <= len(s); i++ {
		for j := 0; j < n; j++ {
			if lower(s[i+j]) != sub[j] {
				continue outer
			}
		}
		return i
	}
	return -1
}

// isWordByte reports whether c can be part of an identifier-like word.
func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// span is a half-open byte range of a string to replace with Redacted.
type span struct{ start, end int }

// applySpans returns s with each span (sorted, non-overlapping) replaced by
// Redacted.
func applySpans(s string, spans []span) string {
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(spans)*len(Redacted))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(Redacted)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}
