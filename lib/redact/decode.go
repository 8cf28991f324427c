package redact

import (
	"bytes"
	"html"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDecodeRounds is how many times ContainsDecoded undoes escapes: a
// value inside a JSON string inside a JSON string needs two.
const maxDecodeRounds = 3

// ContainsDecoded reports whether b, read with common text escapes undone,
// contains a registered pattern. Each round undoes one level of every
// escape below at once, and is read three ways: as it is, with every CR
// and LF removed (base64 or quoted-printable wrapped at a line length,
// a value broken over lines), and with '+' read as a space first (HTML
// form encoding); the rounds repeat up to three times (escapes of
// escapes). The escapes:
//
//   - JSON string escapes (RFC 8259 section 7): \uXXXX in either case,
//     UTF-16 surrogate pairs, \" \\ \/ \b \f \n \r \t, and \xHH
//     (JavaScript);
//   - HTML character references, named (every HTML5 name) and numeric,
//     as html.UnescapeString reads them;
//   - percent-encoding: %XX in either case;
//   - quoted-printable (RFC 2045 section 6.7): =XX and soft line breaks.
//
// It finds echoes that encoders write in forms Scrub does not list (.NET's
// and Gson's \u escapes, upper-case hex, every character escaped,
// entities, form and partial percent-encoding, MIME line wrapping); such
// an echo cannot be replaced in place, so callers refuse the text. Text
// without a '\\', '&', '%', '=', '+', CR or LF is answered without a copy.
func (s *Scrubber) ContainsDecoded(b []byte) bool {
	if s.load() == nil || bytes.IndexAny(b, "\\&%=+\r\n") < 0 {
		return false
	}
	// A view that does not nest, read once: '+' as a space (forms).
	if bytes.IndexByte(b, '+') >= 0 && s.Contains(unescape(bytes.ReplaceAll(b, []byte("+"), []byte(" ")))) {
		return true
	}
	for round := range maxDecodeRounds {
		d := unescape(b)
		if bytes.IndexByte(d, '&') >= 0 {
			if u := html.UnescapeString(string(d)); len(u) != len(d) {
				d = []byte(u)
			}
		}
		undone := len(d) != len(b)
		if !undone && round > 0 { // this text's views were read last round
			return false
		}
		if indexIn(d, &newline) >= 0 && s.Contains(dropNewlines(d)) {
			return true
		}
		if !undone {
			return false
		}
		if s.Contains(d) {
			return true
		}
		b = d
	}
	return false
}

// dropNewlines returns b without its CR and LF bytes.
func dropNewlines(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		i := indexIn(b, &newline)
		if i < 0 {
			return append(out, b...)
		}
		out = append(out, b[:i]...)
		b = b[i+1:]
	}
	return out
}

// byteSet is a set of bytes for indexIn.
type byteSet [256]bool

func newByteSet(s string) (t byteSet) {
	for i := range len(s) {
		t[s[i]] = true
	}
	return t
}

var (
	escapeStart = newByteSet(`\%=`)  // where unescape may have work
	newline     = newByteSet("\r\n") // what dropNewlines drops
)

// indexIn returns the index of the first byte of b in t, or -1: a table
// lookup per byte, where bytes.IndexAny builds its set on every call.
func indexIn(b []byte, t *byteSet) int {
	for i, c := range b {
		if t[c] {
			return i
		}
	}
	return -1
}

// unescape undoes one level of the JSON, percent and quoted-printable
// escapes ContainsDecoded lists (character references are left to
// html.UnescapeString); what is not a complete escape stays as it is.
func unescape(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for {
		i := indexIn(b, &escapeStart)
		if i < 0 {
			return append(out, b...)
		}
		out, b = append(out, b[:i]...), b[i:]
		n := 0
		switch c := b[0]; {
		case c == '\\' && len(b) > 1:
			var r rune
			if r, n = jsonEscape(b); n > 0 {
				out = utf8.AppendRune(out, r)
			}
		case c == '=' && len(b) > 1 && (b[1] == '\n' || b[1] == '\r'): // a soft line break
			n = 2
			if b[1] == '\r' && len(b) > 2 && b[2] == '\n' {
				n = 3
			}
		case len(b) > 2: // %XX or =XX
			if h, ok := unhex(b[1]); ok {
				if l, ok := unhex(b[2]); ok {
					out, n = append(out, h<<4|l), 3
				}
			}
		}
		if n == 0 { // not a complete escape: kept as it is
			out, n = append(out, b[0]), 1
		}
		b = b[n:]
	}
}

// jsonEscape decodes the JSON escape at the start of b (which starts with
// a backslash) and returns the rune and the bytes it took (0: none).
func jsonEscape(b []byte) (rune, int) {
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'x':
		if len(b) >= 4 {
			if h, ok := unhex(b[2]); ok {
				if l, ok := unhex(b[3]); ok {
					return rune(h<<4 | l), 4
				}
			}
		}
		return 0, 0
	case 'u':
		r, ok := hex4(b[2:])
		if !ok {
			return 0, 0
		}
		if utf16.IsSurrogate(r) {
			if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
				if r2, ok := hex4(b[8:]); ok {
					if p := utf16.DecodeRune(r, r2); p != utf8.RuneError {
						return p, 12
					}
				}
			}
			return utf8.RuneError, 6
		}
		return r, 6
	}
	return 0, 0
}

// hex4 reads four hex digits (either case).
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		v, ok := unhex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
