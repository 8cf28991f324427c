package redact

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDecodeRounds is how many times ContainsDecoded undoes escapes: a
// value inside a JSON string inside a JSON string needs two.
const maxDecodeRounds = 3

// ContainsDecoded reports whether b, read with common text escapes undone,
// contains a registered pattern. The escapes, undone together in one pass
// and the pass repeated up to three times (escapes of escapes):
//
//   - JSON string escapes (RFC 8259 section 7): \uXXXX in either case,
//     UTF-16 surrogate pairs, \" \\ \/ \b \f \n \r \t;
//   - HTML and XML character references: &#NN; &#xHH; and &amp; &lt; &gt;
//     &quot; &apos;;
//   - percent-encoding: %XX in either case (a '+' stays a '+').
//
// It finds echoes that encoders write in forms Scrub does not list (.NET's
// and Gson's \u escapes, upper-case hex, every character escaped, entities,
// partial percent-encoding); such an echo cannot be replaced in place, so
// callers refuse the text. Text without a '\\', '&' or '%' is answered
// without a copy.
func (s *Scrubber) ContainsDecoded(b []byte) bool {
	if s.load() == nil || bytes.IndexAny(b, `\&%`) < 0 {
		return false
	}
	for range maxDecodeRounds {
		d := unescape(b)
		if len(d) == len(b) { // nothing was undone
			return false
		}
		if s.Contains(d) {
			return true
		}
		b = d
	}
	return false
}

// unescape undoes one level of the escapes ContainsDecoded lists; what is
// not a complete escape stays as it is.
func unescape(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '\\' && i+1 < len(b):
			if r, n := jsonEscape(b[i:]); n > 0 {
				out = utf8.AppendRune(out, r)
				i += n
				continue
			}
		case c == '&':
			if r, n := charRef(b[i:]); n > 0 {
				out = utf8.AppendRune(out, r)
				i += n
				continue
			}
		case c == '%' && i+2 < len(b):
			if h, ok1 := unhex(b[i+1]); ok1 {
				if l, ok2 := unhex(b[i+2]); ok2 {
					out = append(out, h<<4|l)
					i += 3
					continue
				}
			}
		}
		out = append(out, c)
		i++
	}
	return out
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

// charRef decodes the HTML/XML character reference at the start of b
// (which starts with '&') and returns the rune and the bytes it took.
func charRef(b []byte) (rune, int) {
	end := bytes.IndexByte(b[:min(len(b), 12)], ';')
	if end < 2 {
		return 0, 0
	}
	name := b[1:end]
	switch string(name) {
	case "amp":
		return '&', end + 1
	case "lt":
		return '<', end + 1
	case "gt":
		return '>', end + 1
	case "quot":
		return '"', end + 1
	case "apos":
		return '\'', end + 1
	}
	if name[0] != '#' || len(name) < 2 {
		return 0, 0
	}
	digits, base := name[1:], rune(10)
	if digits[0] == 'x' || digits[0] == 'X' {
		digits, base = digits[1:], 16
	}
	if len(digits) == 0 {
		return 0, 0
	}
	var r rune
	for _, d := range digits {
		v, ok := unhex(d)
		if !ok || rune(v) >= base {
			return 0, 0
		}
		r = r*base + rune(v)
	}
	if r > utf8.MaxRune {
		return 0, 0
	}
	return r, end + 1
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
