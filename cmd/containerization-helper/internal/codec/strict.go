package codec

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"hostkit.dev/lib/wire"
)

// decodeErr builds a CodeDecode error; what names the document.
func decodeErr(what, format string, args ...any) *wire.Error {
	e := wire.Errorf(CodeDecode, what+": "+format, args...)
	e.Retry = wire.RetryAfterObserve
	return e
}

// parse checks b against the cap and returns its single JSON value (RFC
// 8259) as a tree: map[string]any for objects (keys unique), []any for
// arrays, string, json.Number, bool or nil. Everything the package doc
// calls strict about syntax is enforced here, in one pass over the bytes
// (a hand-written parser: json.Decoder.Token, the other way to see
// duplicate keys, decodes at about 4 MB/s).
func parse(what string, b []byte, max int) (any, error) {
	if len(b) > max {
		return nil, decodeErr(what, "%d bytes, over the %d-byte cap", len(b), max)
	}
	if !utf8.Valid(b) {
		return nil, decodeErr(what, "not valid UTF-8")
	}
	p := &parser{b: b, what: what}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.b) {
		return nil, decodeErr(what, "data after the document at byte %d", p.i)
	}
	return v, nil
}

// parser is a strict JSON parser over one document.
type parser struct {
	b    []byte
	i    int
	what string
	path []seg // the current position, formatted only for an error
}

// seg is one step of a JSON path: an object key or an array index.
type seg struct {
	key string
	idx int // -1 for a key
}

// where formats the current path, e.g. $["data"]["cpu"] or $[3].
func (p *parser) where() string {
	var b strings.Builder
	b.WriteString("$")
	for _, s := range p.path {
		if s.idx >= 0 {
			b.WriteString("[" + strconv.Itoa(s.idx) + "]")
		} else {
			b.WriteString(member("", s.key))
		}
	}
	return b.String()
}

// fail reports a syntax error at the current byte; the end of input is a
// partial document.
func (p *parser) fail(msg string) error {
	if p.i >= len(p.b) {
		return decodeErr(p.what, "%s: partial document", p.where())
	}
	return decodeErr(p.what, "%s: %s at byte %d", p.where(), msg, p.i)
}

// space skips JSON white space.
func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value parses one value at p.i (white space already skipped).
func (p *parser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.fail("")
	}
	switch c := p.b[p.i]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return nil, decodeErr(p.what, "%s: nested deeper than %d", p.where(), maxDepth)
		}
		if c == '{' {
			return p.object(depth)
		}
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, p.fail("unexpected character")
}

// literal consumes the word w.
func (p *parser) literal(w string) error {
	if len(p.b)-p.i < len(w) {
		if strings.HasPrefix(w, string(p.b[p.i:])) {
			p.i = len(p.b)
		}
		return p.fail("invalid literal")
	}
	if string(p.b[p.i:p.i+len(w)]) != w {
		return p.fail("invalid literal")
	}
	p.i += len(w)
	return nil
}

// object parses an object; a repeated key is refused.
func (p *parser) object(depth int) (any, error) {
	p.i++ // '{'
	m := map[string]any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, nil
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, p.fail("expected an object key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.path = append(p.path, seg{key: k, idx: -1})
		if _, dup := m[k]; dup {
			return nil, decodeErr(p.what, "%s: duplicate key", p.where())
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, p.fail("expected ':'")
		}
		p.i++
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v
		p.path = p.path[:len(p.path)-1]
		p.space()
		if p.i >= len(p.b) {
			return nil, p.fail("")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, nil
		default:
			return nil, p.fail("expected ',' or '}'")
		}
	}
}

// array parses an array.
func (p *parser) array(depth int) (any, error) {
	p.i++ // '['
	a := []any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		p.space()
		p.path = append(p.path, seg{idx: len(a)})
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.path = p.path[:len(p.path)-1]
		a = append(a, v)
		p.space()
		if p.i >= len(p.b) {
			return nil, p.fail("")
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, nil
		default:
			return nil, p.fail("expected ',' or ']'")
		}
	}
}

// number parses -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? and
// returns its text.
func (p *parser) number() (any, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case digits() == 0:
		return nil, p.fail("invalid number")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.fail("invalid number")
		}
	}
	return json.Number(p.b[start:p.i]), nil
}

// str parses a string (the input is valid UTF-8 already). Control
// characters must be escaped; a \u escape that is a lone surrogate is
// refused rather than replaced.
func (p *parser) str() (string, error) {
	p.i++ // '"'
	start := p.i
	for p.i < len(p.b) { // fast path: no escapes
		c := p.b[p.i]
		if c == '"' {
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.fail("control character in a string")
		}
		p.i++
	}
	buf := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail("control character in a string")
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		p.i++
		if p.i >= len(p.b) {
			return "", p.fail("")
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				if p.i+1 >= len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
					return "", p.fail("lone surrogate")
				}
				p.i += 2
				r2, ok := p.hex4()
				if !ok {
					return "", p.fail("invalid \\u escape")
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", p.fail("lone surrogate")
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.fail("invalid escape")
		}
	}
	return "", p.fail("")
}

// hex4 reads four hex digits.
func (p *parser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		p.i = len(p.b)
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// member returns the path of key k under path; keys are quoted and cut to
// 64 bytes so a message never carries a long attacker-chosen string.
func member(path, k string) string {
	if len(k) > 64 {
		k = k[:64] + "..."
	}
	return path + "[" + strconv.Quote(k) + "]"
}
