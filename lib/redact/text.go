package redact

import (
	"encoding/base64"
	"strings"
)

// maxTextPasses bounds how often String re-applies its rules to reach a
// fixed point.
const maxTextPasses = 4

// String redacts well-known secret shapes in free text and returns the
// result; text without any returns s itself without allocating. It replaces:
//
//   - the value of key=value and key: value pairs whose key IsSensitiveKey
//     (quoted or not; `password=hunter2` → `password=[REDACTED]`,
//     `"token": "x"` → `"token": "[REDACTED]"`, `?access_token=x&a=1` →
//     `?access_token=[REDACTED]&a=1`); a value that starts with an HTTP
//     authorization scheme keeps the scheme;
//   - the credentials after `Bearer` and `Basic` (RFC 6750, RFC 7617);
//     a Basic token must look like one (base64 of "user:pass", or at least
//     16 characters) so prose such as "basic check" is kept;
//   - URL userinfo (`https://user:pw@host` → `https://[REDACTED]@host`).
//
// hkp_ placeholders are left alone. String is a policy, not a guarantee:
// exact secret values are the Scrubber's job.
func String(s string) string {
	for range maxTextPasses {
		if !mayNeedRedaction(s) {
			return s
		}
		out := redactKeyValues(redactUserinfo(redactAuthSchemes(s)))
		if out == s {
			return s
		}
		s = out
	}
	return s
}

// mayNeedRedaction is a cheap, allocation-free prefilter for String: it
// reports false only for text that none of String's rules can change.
// Schemes need "bearer" or "basic"; userinfo needs "://" and an '@';
// key=value and key: value pairs need a separator and a sensitive key,
// and every sensitive key holds one of sensitiveFragments. So text with
// neither scheme word, nor userinfo, nor a separator together with a
// fragment is left alone. (Origins, addresses and paths, the strings of
// most audit records and log lines, end here after one pass.)
//
// It looks each byte up in prefilterClass (most bytes are in no class)
// rather than switching on it.
func mayNeedRedaction(s string) bool {
	var seen uint8
	for i := 0; i < len(s); i++ {
		c := prefilterClass[s[i]]
		if c == 0 {
			continue
		}
		seen |= c
		if c&classB != 0 && (hasPrefixFold(s[i:], "bearer") || hasPrefixFold(s[i:], "basic")) {
			return true
		}
	}
	if seen&classSep == 0 {
		return false
	}
	if seen&classAt != 0 && strings.Contains(s, "://") {
		return true
	}
	return hasSensitiveFragment(s)
}

// Byte classes of mayNeedRedaction.
const (
	classSep = 1 << iota // '=' or ':'
	classAt              // '@'
	classB               // 'b' or 'B', which may start Bearer or Basic
)

// prefilterClass maps each byte to its classes (0 for most bytes).
var prefilterClass = [256]uint8{'=': classSep, ':': classSep, '@': classAt, 'b': classB, 'B': classB}

// authSchemes are words that introduce a credential in an Authorization
// header value (lowercase).
var authSchemes = []string{"basic", "bearer", "digest", "negotiate", "token"}

// isTokenByte reports whether c may appear in a b64token (RFC 6750 §2.1).
func isTokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("-._~+/=", c) >= 0
}

// tokenAfter skips spaces and tabs from i and returns the b64token there.
func tokenAfter(s string, i int) (start, end int) {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	start = i
	for i < len(s) && isTokenByte(s[i]) {
		i++
	}
	return start, i
}

// redactAuthSchemes replaces the token after the words Bearer and Basic.
func redactAuthSchemes(s string) string {
	var spans []span
	for _, scheme := range []string{"bearer", "basic"} {
		for i := indexFold(s, scheme, 0); i >= 0; i = indexFold(s, scheme, i+1) {
			e := i + len(scheme)
			if i > 0 && isWordByte(s[i-1]) || e >= len(s) || s[e] != ' ' && s[e] != '\t' {
				continue
			}
			ts, te := tokenAfter(s, e)
			tok := s[ts:te]
			if tok == "" || isPlaceholder(tok) || scheme == "basic" && !looksBasic(tok) {
				continue
			}
			spans = append(spans, span{ts, te})
		}
	}
	return applySpans(s, sortSpans(spans))
}

// looksBasic reports whether tok is plausibly Basic credentials.
func looksBasic(tok string) bool {
	if len(tok) >= 16 {
		return true
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(tok); err == nil && strings.IndexByte(string(b), ':') >= 0 {
			return true
		}
	}
	return false
}

// sortSpans sorts spans by start and drops any that overlap an earlier one.
func sortSpans(spans []span) []span {
	for i := 1; i < len(spans); i++ { // insertion sort: spans are few
		for j := i; j > 0 && spans[j].start < spans[j-1].start; j-- {
			spans[j], spans[j-1] = spans[j-1], spans[j]
		}
	}
	out := spans[:0]
	for _, sp := range spans {
		if len(out) > 0 && sp.start < out[len(out)-1].end {
			continue
		}
		out = append(out, sp)
	}
	return out
}

// redactUserinfo replaces the userinfo of every scheme://userinfo@host.
func redactUserinfo(s string) string {
	var spans []span
	for i := strings.Index(s, "://"); i >= 0; {
		start := i + 3
		end := start
		for end < len(s) && strings.IndexByte("/?#\"'<> \t\r\n", s[end]) < 0 {
			end++
		}
		if at := strings.LastIndexByte(s[start:end], '@'); at > 0 {
			spans = append(spans, span{start, start + at})
		}
		next := strings.Index(s[start:], "://")
		if next < 0 {
			break
		}
		i = start + next
	}
	return applySpans(s, spans)
}

// redactKeyValues replaces the values of sensitive key=value and key: value
// pairs.
func redactKeyValues(s string) string {
	var spans []span
	for i := 0; i < len(s); i++ {
		sep := s[i]
		if sep != '=' && sep != ':' {
			continue
		}
		if sep == ':' && strings.HasPrefix(s[i+1:], "//") {
			continue // a URL scheme
		}
		if key := keyBefore(s, i, sep); key == "" || !IsSensitiveKey(key) {
			continue
		}
		vs, ve := valueAfter(s, i+1)
		if vs == ve || s[vs:ve] == Redacted || isPlaceholder(s[vs:ve]) {
			continue
		}
		spans = append(spans, span{vs, ve})
		i = ve - 1
	}
	return applySpans(s, spans)
}

// keyBefore returns the key that ends just before the separator at i,
// skipping blanks and one closing quote. Dots are key bytes only before '='
// so that "pkg.Func: message" is not read as a pair.
func keyBefore(s string, i int, sep byte) string {
	j := i
	for j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if j > 0 && (s[j-1] == '"' || s[j-1] == '\'') {
		j--
	}
	end := j
	for j > 0 && (isWordByte(s[j-1]) || s[j-1] == '-' || sep == '=' && s[j-1] == '.') {
		j--
	}
	return s[j:end]
}

// valueAfter returns the value that starts after a separator at i-1: a
// quoted string (without its quotes), the credential after an authorization
// scheme, or a run of bytes up to a blank or one of & , ; " '.
func valueAfter(s string, i int) (start, end int) {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		q := s[i]
		j := i + 1
		for j < len(s) && s[j] != q {
			if s[j] == '\\' {
				j++
			}
			j++
		}
		return i + 1, min(j, len(s))
	}
	start, end = i, runEnd(s, i)
	for _, scheme := range authSchemes {
		if end-start == len(scheme) && strings.EqualFold(s[start:end], scheme) {
			j := end
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
			if je := runEnd(s, j); j > end && je > j {
				return j, je
			}
		}
	}
	return start, end
}

// runEnd returns the end of the unquoted value that starts at i.
func runEnd(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\r\n&,;\"'", s[i]) < 0 {
		i++
	}
	return i
}
