package redact

import (
	"bytes"
	"html"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// ContainsDecoded reports whether b, read with common text escapes undone,
// contains a registered pattern. Each round undoes one level of every
// escape below at once, and is read three ways: as it is, with line
// breaks removed (base64 or quoted-printable wrapped at a line length, a
// value broken over lines: runs of at most MaxLineBreak CR and LF bytes),
// and with '+' read as a space first (HTML form encoding); the rounds
// repeat up to MaxDecodeLevels times (escapes of escapes). Every view is
// also read for the forms with something between a value's characters:
// hex pairs with up to MaxHexSeparators separators ('-', ':', '.', ' ')
// between them, and any form with runs of up to MaxInvisibleRun invisible
// characters (U+200B–U+200D, U+2060, U+FEFF, U+00AD) inserted. The
// escapes:
//
//   - JSON string escapes (RFC 8259 section 7): \uXXXX in either case,
//     UTF-16 surrogate pairs, \" \\ \/ \b \f \n \r \t, and \xHH
//     (JavaScript);
//   - HTML character references, named (every HTML5 name) and numeric
//     (at most MaxRefDigits decimal or MaxRefHexDigits hex digits), as
//     html.UnescapeString reads them;
//   - percent-encoding: %XX in either case;
//   - quoted-printable (RFC 2045 section 6.7): =XX and soft line breaks
//     (one after each byte per level).
//
// It finds echoes that encoders write in forms Scrub does not list (.NET's
// and Gson's \u escapes, upper-case hex, every character escaped,
// entities, form and partial percent-encoding, MIME line wrapping, hex
// dumps, zero-width characters); such an echo cannot be replaced in
// place, so callers refuse the text. Past the bounds (bounds.go) a form
// is not found. Text without a '\\', '&', '%', '=', '+', CR or LF, and
// without a separator between hex digits or an invisible character, is
// answered without a copy.
func (s *Scrubber) ContainsDecoded(b []byte) bool {
	m := s.load()
	if m == nil {
		return false
	}
	if m.spaced(b) {
		return true
	}
	if !bytes.ContainsAny(b, "\\&%=+\r\n") {
		return false
	}
	// A view that does not nest, read once: '+' as a space (forms). It is
	// read whether or not the text has a '+', so that what a stream has
	// read of it never depends on a '+' that comes later; without one it
	// is the first round before references are undone.
	plus := bytes.IndexByte(b, '+') >= 0
	if plus {
		if v := unescapePlus(b, true); m.contains(v) || m.spaced(v) {
			return true
		}
	}
	for round := range MaxDecodeLevels {
		d := unescape(b)
		if round == 0 && !plus && bytes.IndexByte(d, '&') >= 0 && (m.contains(d) || m.spaced(d)) {
			return true // the '+' view (references change d below)
		}
		if bytes.IndexByte(d, '&') >= 0 {
			capNumericRefs(d)
			// html.UnescapeString returns its argument when it has
			// nothing to undo and a new string otherwise: neither copy
			// is needed (nothing writes to a string's bytes here). Its
			// result is taken whenever it differs from d.
			if u := html.UnescapeString(unsafe.String(unsafe.SliceData(d), len(d))); u != unsafe.String(unsafe.SliceData(d), len(d)) {
				d = unsafe.Slice(unsafe.StringData(u), len(u))
			}
		}
		// Escapes were undone when the text changed (not only its
		// length: a reference may decode to as many bytes as it takes).
		undone := len(d) != len(b) || !bytes.Equal(d, b)
		if !undone && round > 0 { // this text's views were read last round
			return false
		}
		if nd, dropped := dropNewlines(d); dropped && (m.contains(nd) || m.spaced(nd)) {
			return true
		}
		if !undone {
			return false
		}
		if m.contains(d) || m.spaced(d) {
			return true
		}
		b = d
	}
	return false
}

// dropNewlines returns b without its runs of at most MaxLineBreak CR and
// LF bytes, and whether it removed any; a longer run stays whole.
func dropNewlines(b []byte) ([]byte, bool) {
	if indexIn(b, &newline) < 0 {
		return b, false
	}
	out := make([]byte, 0, len(b))
	dropped := false
	for len(b) > 0 {
		i := indexIn(b, &newline)
		if i < 0 {
			return append(out, b...), dropped
		}
		out = append(out, b[:i]...)
		j := i
		for j < len(b) && newline[b[j]] {
			j++
		}
		if j-i > MaxLineBreak {
			out = append(out, b[i:j]...)
		} else {
			dropped = true
		}
		b = b[j:]
	}
	return out, dropped
}

// capNumericRefs keeps html.UnescapeString from decoding a numeric
// character reference with more digits than MaxRefDigits (decimal) or
// MaxRefHexDigits (hex), leading zeros included: its '&' becomes NUL in
// d (a copy the caller owns), so that the form keeps its bound.
func capNumericRefs(d []byte) {
	for i := 0; ; {
		j := bytes.Index(d[i:], []byte("&#"))
		if j < 0 {
			return
		}
		at := i + j
		k, limit, isDigit := at+2, MaxRefDigits, isDecimal
		if k < len(d) && (d[k] == 'x' || d[k] == 'X') {
			k, limit, isDigit = k+1, MaxRefHexDigits, isHexDigit
		}
		n := 0
		for k+n < len(d) && isDigit(d[k+n]) {
			n++
		}
		if n > limit {
			d[at] = 0
		}
		i = at + 2
	}
}

func isDecimal(c byte) bool  { return '0' <= c && c <= '9' }
func isHexDigit(c byte) bool { _, ok := unhex(c); return ok }

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
	escapePlus  = newByteSet(`\%=+`) // and unescapePlus
	newline     = newByteSet("\r\n") // what dropNewlines drops
)

// indexIn returns the index of the first byte of b in t, or -1: a table
// lookup per byte, where bytes.IndexAny builds its set on every call.
// Eight bytes are looked up per step (most text has none of t's bytes),
// which also keeps the loop's speed from depending on where the
// compiler happens to place it.
func indexIn(b []byte, t *byteSet) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := b[i : i+8 : i+8]
		if t[w[0]] || t[w[1]] || t[w[2]] || t[w[3]] || t[w[4]] || t[w[5]] || t[w[6]] || t[w[7]] {
			break
		}
	}
	for ; i < len(b); i++ {
		if t[b[i]] {
			return i
		}
	}
	return -1
}

// unescape undoes one level of the JSON, percent and quoted-printable
// escapes ContainsDecoded lists (character references are left to
// html.UnescapeString); what is not a complete escape stays as it is.
func unescape(b []byte) []byte { return unescapePlus(b, false) }

// unescapePlus is unescape, reading '+' as a space first when plus is
// set (HTML form encoding), in the same pass.
func unescapePlus(b []byte, plus bool) []byte {
	starts := &escapeStart
	if plus {
		starts = &escapePlus
	}
	out := make([]byte, 0, len(b))
	soft := -1 // len(out) after the last soft line break removed
	for {
		i := indexIn(b, starts)
		if i < 0 {
			return append(out, b...)
		}
		out, b = append(out, b[:i]...), b[i:]
		n := 0
		switch c := b[0]; {
		case c == '+':
			out, n = append(out, ' '), 1
		case c == '\\' && len(b) > 1:
			var r rune
			if r, n = jsonEscape(b); n > 0 {
				out = utf8.AppendRune(out, r)
			}
		case c == '=' && len(b) > 1 && (b[1] == '\n' || b[1] == '\r') && len(out) != soft:
			// A soft line break; one per byte and level (a second one
			// right after it stays, for the next level), so that the
			// form keeps its bound (SpanSoftBreak).
			n, soft = 2, len(out)
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
