package redact

import (
	"html"
	"unicode/utf16"
	"unicode/utf8"
)

// The streaming forms of the views ContainsDecoded reads: each
// transducer reads one text byte at a time (with the offset, in the
// stream, of the text byte it stands for) and writes the bytes of its
// view, each carrying the offset of the first text byte of the escape
// that gave it. A transducer holds back only an escape it has not yet
// seen the end of (at most a few bytes: SpanEscape, a surrogate pair,
// an entity's name), so a stream keeps the views without keeping the
// text. flush ends the text: what is held is decided as the buffered
// functions decide it at the end of their input.

// vbyte is one byte of a view and the offset of its origin in the text.
type vbyte struct {
	c   byte
	org int64
}

// unescaper is unescapePlus as a stream.
type unescaper struct {
	plus    bool
	starts  *byteSet
	pend    []byte
	porg    []int64
	blocked bool // a soft line break was the last thing removed
}

func newUnescaper(plus bool) *unescaper {
	u := &unescaper{plus: plus, starts: &escapeStart}
	if plus {
		u.starts = &escapePlus
	}
	return u
}

// held returns the offset of the first byte held, if any.
func (u *unescaper) held() (int64, bool) {
	if len(u.pend) == 0 {
		return 0, false
	}
	return u.porg[0], true
}

func (u *unescaper) push(c byte, org int64, out []vbyte) []vbyte {
	if len(u.pend) == 0 && !u.starts[c] {
		u.blocked = false
		return append(out, vbyte{c, org})
	}
	u.pend = append(u.pend, c)
	u.porg = append(u.porg, org)
	return u.drain(false, out)
}

func (u *unescaper) flush(out []vbyte) []vbyte { return u.drain(true, out) }

// Results of unescaper.decide.
const (
	escNeed    = iota // the escape is not complete yet
	escLiteral        // the first byte stands for itself
	escRune           // r, UTF-8 encoded, for n bytes
	escByte           // the byte r for n bytes (%XX, =XX)
	escSoft           // a soft line break of n bytes, removed
)

func (u *unescaper) drain(eof bool, out []vbyte) []vbyte {
	for len(u.pend) > 0 {
		b := u.pend
		if !u.starts[b[0]] {
			out = append(out, vbyte{b[0], u.porg[0]})
			u.blocked = false
			u.shift(1)
			continue
		}
		kind, r, n := u.decide(b, eof)
		org := u.porg[0]
		switch kind {
		case escNeed:
			return out
		case escLiteral:
			out = append(out, vbyte{b[0], org})
			n = 1
		case escRune:
			var enc [utf8.UTFMax]byte
			for _, c := range utf8.AppendRune(enc[:0], r) {
				out = append(out, vbyte{c, org})
			}
		case escByte:
			out = append(out, vbyte{byte(r), org})
		case escSoft:
			u.blocked = true
			u.shift(n)
			continue
		}
		u.blocked = false
		u.shift(n)
	}
	return out
}

func (u *unescaper) shift(n int) {
	u.pend = u.pend[:copy(u.pend, u.pend[n:])]
	u.porg = u.porg[:copy(u.porg, u.porg[n:])]
}

// decide reads the escape at the start of b as unescapePlus does, where b
// is all the text left when eof is set, and a prefix of it otherwise.
func (u *unescaper) decide(b []byte, eof bool) (kind int, r rune, n int) {
	switch c := b[0]; {
	case c == '+':
		return escRune, ' ', 1
	case c == '\\':
		if len(b) < 2 {
			return need(eof)
		}
		return jsonEscapeStream(b, eof)
	case c == '=':
		if len(b) < 2 {
			return need(eof)
		}
		if (b[1] == '\n' || b[1] == '\r') && !u.blocked {
			if b[1] == '\n' {
				return escSoft, 0, 2
			}
			if len(b) < 3 {
				if eof {
					return escSoft, 0, 2
				}
				return escNeed, 0, 0
			}
			if b[2] == '\n' {
				return escSoft, 0, 3
			}
			return escSoft, 0, 2
		}
	}
	// %XX or =XX
	h, ok := unhex(b[1%len(b)])
	if len(b) >= 2 && !ok {
		return escLiteral, 0, 1
	}
	if len(b) < 3 {
		return need(eof)
	}
	l, ok := unhex(b[2])
	if !ok {
		return escLiteral, 0, 1
	}
	return escByte, rune(h<<4 | l), 3
}

// need is the answer for an escape cut short: wait for more text, or, at
// the end of the text, the first byte stands for itself.
func need(eof bool) (int, rune, int) {
	if eof {
		return escLiteral, 0, 1
	}
	return escNeed, 0, 0
}

// jsonEscapeStream is jsonEscape on a prefix b (len(b) ≥ 2) of the text.
func jsonEscapeStream(b []byte, eof bool) (int, rune, int) {
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		r, n := jsonEscape(b[:2])
		return escRune, r, n
	case 'x':
		for i := 2; i < 4; i++ {
			if i >= len(b) {
				return need(eof)
			}
			if _, ok := unhex(b[i]); !ok {
				return escLiteral, 0, 1
			}
		}
		r, n := jsonEscape(b[:4])
		return escRune, r, n
	case 'u':
		for i := 2; i < 6; i++ {
			if i >= len(b) {
				return need(eof)
			}
			if _, ok := unhex(b[i]); !ok {
				return escLiteral, 0, 1
			}
		}
		r, _ := hex4(b[2:6])
		if !utf16.IsSurrogate(r) {
			return escRune, r, 6
		}
		// A pair needs `\uXXXX` after it; anything else, or the end,
		// makes this one a replacement character.
		for i := 6; i < 12; i++ {
			if i >= len(b) {
				if eof {
					return escRune, utf8.RuneError, 6
				}
				return escNeed, 0, 0
			}
			switch {
			case i == 6 && b[i] != '\\', i == 7 && b[i] != 'u':
				return escRune, utf8.RuneError, 6
			case i >= 8:
				if _, ok := unhex(b[i]); !ok {
					return escRune, utf8.RuneError, 6
				}
			}
		}
		r, n := jsonEscape(b[:12])
		return escRune, r, n
	}
	return escLiteral, 0, 1
}

// maxEntityName bounds the name of a named character reference that is
// worth reading whole: longer than every HTML5 name, so a longer run of
// letters and digits can only match by its first few bytes (html's
// longestEntityWithoutSemicolon), which this many bytes decide.
const maxEntityName = 64

// entities is capNumericRefs followed by html.UnescapeString, as a
// stream: one '&' and what follows it is held until the reference is
// known to end.
type entities struct {
	pend []byte
	porg []int64
}

func (e *entities) held() (int64, bool) {
	if len(e.pend) == 0 {
		return 0, false
	}
	return e.porg[0], true
}

func (e *entities) push(c byte, org int64, out []vbyte) []vbyte {
	if len(e.pend) == 0 && c != '&' {
		return append(out, vbyte{c, org})
	}
	e.pend = append(e.pend, c)
	e.porg = append(e.porg, org)
	return e.drain(false, out)
}

func (e *entities) flush(out []vbyte) []vbyte { return e.drain(true, out) }

func (e *entities) drain(eof bool, out []vbyte) []vbyte {
	for len(e.pend) > 0 {
		b := e.pend
		if b[0] != '&' {
			out = append(out, vbyte{b[0], e.porg[0]})
			e.shift(1)
			continue
		}
		n, capped, ok := entityEnd(b, eof)
		if !ok {
			return out
		}
		if capped || n == 1 {
			// A capped reference's '&' reads as NUL; a lone '&' (no
			// name or '#' after it) stands for itself.
			c := byte(0)
			if !capped {
				c = '&'
			}
			out = append(out, vbyte{c, e.porg[0]})
			e.shift(1)
			continue
		}
		w := string(b[:n])
		var u string
		if eof && n == len(b) {
			u = html.UnescapeString(w)
		} else {
			u = html.UnescapeString(w + "!")
			u = u[:len(u)-1]
		}
		if u == w {
			for i := range n {
				out = append(out, vbyte{b[i], e.porg[i]})
			}
		} else {
			for i := range len(u) {
				out = append(out, vbyte{u[i], e.porg[0]})
			}
		}
		e.shift(n)
	}
	return out
}

func (e *entities) shift(n int) {
	e.pend = e.pend[:copy(e.pend, e.pend[n:])]
	e.porg = e.porg[:copy(e.porg, e.porg[n:])]
}

// entityEnd reads the reference at the start of b ('&'): n is how many
// bytes html.UnescapeString reads as one reference (the rest of the
// text decides nothing about it); capped reports a numeric reference
// with too many digits (capNumericRefs turns its '&' into NUL); ok is
// false when b is too short to tell.
func entityEnd(b []byte, eof bool) (n int, capped, ok bool) {
	if len(b) < 2 {
		return 1, false, eof
	}
	if b[1] == '#' {
		k, limit, isDigit := 2, MaxRefDigits, isDecimal
		if len(b) < 3 {
			return len(b), false, eof
		}
		if b[2] == 'x' || b[2] == 'X' {
			k, limit, isDigit = 3, MaxRefHexDigits, isHexDigit
		}
		d := 0
		for k+d < len(b) && isDigit(b[k+d]) {
			d++
			if d > limit {
				return 0, true, true
			}
		}
		if k+d == len(b) {
			return len(b), false, eof
		}
		if b[k+d] == ';' {
			return k + d + 1, false, true
		}
		return k + d, false, true
	}
	i := 1
	for i < len(b) && isAlnum(b[i]) {
		i++
		if i > maxEntityName {
			return i, false, true
		}
	}
	if i == len(b) {
		return len(b), false, eof
	}
	if b[i] == ';' {
		return i + 1, false, true
	}
	return i, false, true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
