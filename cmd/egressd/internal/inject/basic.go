package inject

import (
	"encoding/base64"
	"strings"

	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// Halves of an HTTP Basic credential (RFC 7617): the names of a basic
// target (`basic:user`, `basic:password`).
const (
	BasicUser     = "user"
	BasicPassword = "password"
)

// BasicHeader is the header field a basic target fills.
const BasicHeader = "Authorization"

// Basic is a decoded HTTP Basic credential (RFC 7617 §2): the user-id
// (everything before the first ':') and the password (everything after).
type Basic struct {
	User, Password string // UTF-8 without a control character; User without ':'
}

// Half returns the user-id (BasicUser) or the password (any other name).
func (b Basic) Half(name string) string {
	if name == BasicUser {
		return b.User
	}
	return b.Password
}

// ParseBasic decodes a header value `Basic <token68>` strictly: the
// scheme in any case (RFC 9110 §11.1), one or more spaces, then standard
// base64 with its padding and nothing else (RFC 4648 §4, no line breaks,
// no URL-safe alphabet), decoding to a user-id and password split at the
// first ':'. It reports false for anything else: such a value is never a
// placement (AppendBasicForms still finds a placeholder in it).
func ParseBasic(v string) (Basic, bool) {
	tok, ok := basicToken(v, false)
	if !ok || tok == "" || strings.ContainsAny(tok, " \r\n") { // Strict still skips CR and LF
		return Basic{}, false
	}
	dec, err := base64.StdEncoding.Strict().DecodeString(tok)
	if err != nil {
		return Basic{}, false
	}
	user, pass, ok := strings.Cut(string(dec), ":")
	if !ok {
		return Basic{}, false
	}
	return Basic{User: user, Password: pass}, true
}

// basicToken returns what follows the scheme and its spaces when v's
// scheme is Basic (any case). Strict, the scheme starts v and spaces
// follow it (RFC 9110 §11.4); lenient, as a server might read it,
// whitespace (spaces, tabs) may also precede it or follow it.
func basicToken(v string, lenient bool) (string, bool) {
	const scheme = "basic"
	ws := " "
	if lenient {
		ws = " \t"
		v = strings.TrimLeft(v, ws)
	}
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) || strings.IndexByte(ws, v[len(scheme)]) < 0 {
		return "", false
	}
	return strings.TrimLeft(v[len(scheme):], ws), true
}

// EncodeBasic returns the header value `Basic base64(user ":" password)`
// in standard padded base64 (RFC 7617 §2).
func EncodeBasic(user, password []byte) string {
	raw := make([]byte, 0, len(user)+1+len(password))
	raw = append(append(append(raw, user...), ':'), password...)
	out := "Basic " + base64.StdEncoding.EncodeToString(raw)
	clear(raw)
	return out
}

// AppendBasicForms appends to forms the texts a server could decode from
// header value v when its scheme is Basic, however lenient its base64
// decoder: Python's b64decode drops bytes outside the alphabet, Node's
// Buffer takes the URL-safe alphabet and stops at '=', others skip the
// padding or a final partial quantum, or read one word. Each form is a
// token (the whole rest of v, and its first word when there are more)
// decoded with every byte outside both alphabets dropped, the URL-safe
// alphabet read as the standard one and a final lone character ignored:
// once up to its first '=' and once with every '=' dropped. The forms are
// written into scratch (grown as needed; a caller's array spares the
// allocation), which is returned for reuse. A value whose scheme is not
// Basic adds nothing. It is for scanning only: a placement needs
// ParseBasic.
func AppendBasicForms(forms [][]byte, scratch []byte, v string) ([][]byte, []byte) {
	tok, ok := basicToken(v, true)
	if !ok {
		return forms, scratch
	}
	forms, scratch = appendLenient(forms, scratch, tok)
	if i := strings.IndexAny(tok, " \t,"); i >= 0 {
		forms, scratch = appendLenient(forms, scratch, tok[:i])
	}
	return forms, scratch
}

// IsBasic reports whether header value v's scheme is Basic as a lenient
// server reads it (whitespace around the scheme, any case): the values
// AppendBasicForms decodes.
func IsBasic(v string) bool {
	_, ok := basicToken(v, true)
	return ok
}

// appendLenient appends tok decoded up to its first '=' (when it has
// one) and with every '=' dropped.
func appendLenient(forms [][]byte, scratch []byte, tok string) ([][]byte, []byte) {
	var form []byte
	if i := strings.IndexByte(tok, '='); i >= 0 {
		form, scratch = lenientDecode(scratch, tok[:i])
		forms = append(forms, form)
	}
	form, scratch = lenientDecode(scratch, tok)
	return append(forms, form), scratch
}

// lenientDecode decodes tok as base64 after dropping every byte outside
// both alphabets ('=' included) and reading '-' and '_' as '+' and '/',
// ignoring a final lone character (it holds no whole byte) and the unused
// bits of the last quantum. The cleaned token and then the decoded bytes
// are appended to scratch; it returns the decoded bytes (a slice of
// scratch, with its capacity cut so that a later append cannot overwrite
// them) and scratch.
func lenientDecode(scratch []byte, tok string) ([]byte, []byte) {
	start := len(scratch)
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c == '-':
			c = '+'
		case c == '_':
			c = '/'
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '+', c == '/':
		default:
			continue
		}
		scratch = append(scratch, c)
	}
	if (len(scratch)-start)%4 == 1 {
		scratch = scratch[:len(scratch)-1]
	}
	clean := len(scratch)
	n := base64.RawStdEncoding.DecodedLen(clean - start)
	scratch = append(scratch, make([]byte, n)...) // no allocation while it fits
	// Only the alphabet is left, in whole bytes: it decodes.
	n, _ = base64.RawStdEncoding.Decode(scratch[clean:], scratch[start:clean])
	out := scratch[clean : clean+n : clean+n]
	return out, scratch[:clean+n]
}

// Authorization places value as half (BasicUser or BasicPassword) of the
// request's `Authorization: Basic` credential, for native injection,
// where the caller holds no placeholder: the other half is the one the
// caller sent in an `Authorization: Basic` field whose half is empty
// (`alice:` for a password), else empty; fixedUser, when set, replaces
// the user-id whatever was sent. Errors: egress.injection_conflict (an
// Authorization field that is not such a Basic credential, or more than
// one).
func Authorization(rec *request.Record, half, fixedUser string, value []byte) error {
	var b Basic
	if vs, present := rec.Header[BasicHeader]; present {
		var ok bool
		if len(vs) == 1 {
			b, ok = ParseBasic(vs[0])
		}
		if !ok || b.Half(half) != "" {
			return wire.Errorf(egressdapi.CodeInjectionConflict, "header %s is already set and is not a Basic credential with an empty %s", BasicHeader, half)
		}
	}
	if half == BasicUser {
		rec.Header[BasicHeader] = []string{EncodeBasic(value, []byte(b.Password))}
		return nil
	}
	if fixedUser != "" {
		b.User = fixedUser
	}
	rec.Header[BasicHeader] = []string{EncodeBasic([]byte(b.User), value)}
	return nil
}
