// Package scan looks for raw credential material in the caller-supplied parts
// of an outbound request (docs/egressd.md, "The pipeline", steps 2 and 4). A
// caller never holds a raw value legitimately: egressd alone places values,
// at their staged targets, after scanning. So any held value — of this
// invocation or another — found in the caller's URL, headers or body is
// refused.
package scan

import (
	"net/url"
	"strings"
	"unsafe"

	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// MaxDecodeRounds bounds percent-decoding of the URL to a fixpoint.
const MaxDecodeRounds = 4

// Scanner checks requests against every value egressd holds.
type Scanner struct {
	// Scrubber knows every held value and its encodings (raw,
	// percent-encoded, base64, hex).
	Scrubber *redact.Scrubber
	// Holds reports whether a string equals a held value exactly.
	Holds func([]byte) bool
	// HoldsString is Holds for a string, without the copy that converting
	// it for Holds makes (the call is indirect, so the conversion
	// escapes); nil: Holds is used.
	HoldsString func(string) bool
}

// holds reports whether v equals a held value (HoldsString, or Holds).
func (s Scanner) holds(v string) bool {
	if s.HoldsString != nil {
		return s.HoldsString(v)
	}
	return s.Holds([]byte(v))
}

// Manual refuses a request in which a whole header value, a token of one
// (split at space, comma and semicolon; also the part after "=" of a
// "k=v" token),
// a query parameter value, a path segment (percent-decoded) or the body
// equals a held value: the caller holds raw material
// (egress.manual_credential_rejected).
func (s Scanner) Manual(rec *request.Record) error {
	if s.Holds == nil {
		return nil
	}
	for _, vs := range rec.Header {
		for _, v := range vs {
			if s.holds(v) {
				return errManual()
			}
			// The tokens strings.FieldsFunc would give (split at space,
			// comma and semicolon, empty ones dropped), without its slice.
			for rest := v; rest != ""; {
				tok := rest
				if i := strings.IndexAny(rest, " ,;"); i >= 0 {
					tok, rest = rest[:i], rest[i+1:]
				} else {
					rest = ""
				}
				if tok == "" {
					continue
				}
				_, after, _ := strings.Cut(tok, "=")
				if s.holds(tok) || s.holds(after) {
					return errManual()
				}
			}
		}
	}
	if rec.Query != "" {
		if q, err := url.ParseQuery(rec.Query); err == nil {
			for _, vs := range q {
				for _, v := range vs {
					if s.holds(v) {
						return errManual()
					}
				}
			}
		}
	}
	for path := rec.Path; ; {
		seg, rest, more := strings.Cut(path, "/")
		if d, err := url.PathUnescape(seg); err == nil && s.holds(d) {
			return errManual()
		}
		if !more {
			break
		}
		path = rest
	}
	if len(rec.Body) > 0 && s.Holds(rec.Body) {
		return errManual()
	}
	return nil
}

// errManual and errInRequest are the two refusals, made when they happen
// (wire.Errorf formats its message).
func errManual() error {
	return wire.Errorf(egressdapi.CodeManualCredential, "the request carries a raw credential value; send it without one and egressd attaches it")
}

func errInRequest() error {
	return wire.Errorf(egressdapi.CodeSecretInRequest, "the request carries credential material where egressd did not place it")
}

// Request refuses a request whose target (raw, and percent-decoded up to
// MaxDecodeRounds times, with and without "+" as space), header names and
// values, or body contains a held value in any form the Scrubber knows:
// the exact forms (Contains) and those it finds once escapes are undone,
// in hex pairs with separators, or with invisible characters inserted
// (ContainsDecoded) (egress.secret_in_request). The host is Host's.
func (s Scanner) Request(rec *request.Record) error {
	sc := s.Scrubber
	var forms [4]string
	target := rec.Target()
	for _, form := range AppendDecodedForms(forms[:0], target) {
		if sc.Contains([]byte(form)) {
			return errInRequest()
		}
	}
	if sc.ContainsDecoded(view(target)) {
		return errInRequest()
	}
	for name, vs := range rec.Header {
		if s.found(view(name)) {
			return errInRequest()
		}
		for _, v := range vs {
			if s.found(view(v)) {
				return errInRequest()
			}
		}
	}
	if s.found(rec.Body) {
		return errInRequest()
	}
	return nil
}

// view is s's bytes, without a copy, for the Scrubber's methods, which
// only read them.
func view(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// found reports whether b holds a held value in any form the Scrubber
// knows.
func (s Scanner) found(b []byte) bool {
	return s.Scrubber.Contains(b) || s.Scrubber.ContainsDecoded(b)
}

// Host refuses a host name or authority — a URL's (as written, and
// canonical), a CONNECT target, a Host field, a TLS server name — that
// holds a held value in any form the Scrubber knows or a host name forces
// (redact.Scrubber.ContainsInHost: any letter case, base32, a value split
// over labels) (egress.secret_in_request). Callers run it before the name
// is resolved, dialled, sent or written to a log or an audit record.
func (s Scanner) Host(host string) error {
	if host != "" && s.Scrubber.ContainsInHost(host) {
		return errInRequest()
	}
	return nil
}

// DecodedForms returns s and its successive percent-decodings (lenient:
// an invalid escape stays as it is), at most MaxDecodeRounds of them, each
// also with "+" read as a space; it stops at a fixpoint.
func DecodedForms(s string) []string { return AppendDecodedForms(nil, s) }

// AppendDecodedForms appends DecodedForms(s) to forms (a caller's array
// spares the allocation for the usual single form).
func AppendDecodedForms(forms []string, s string) []string {
	forms = append(forms, s)
	if strings.IndexByte(s, '+') >= 0 {
		forms = append(forms, strings.ReplaceAll(s, "+", " "))
	}
	cur := s
	for range MaxDecodeRounds {
		next := percentDecode(cur)
		if next == cur {
			break
		}
		forms = append(forms, next)
		if strings.IndexByte(next, '+') >= 0 {
			forms = append(forms, strings.ReplaceAll(next, "+", " "))
		}
		cur = next
	}
	return forms
}

func percentDecode(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && unhex(s[i+1]) >= 0 && unhex(s[i+2]) >= 0 {
			b.WriteByte(byte(unhex(s[i+1])<<4 | unhex(s[i+2])))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
