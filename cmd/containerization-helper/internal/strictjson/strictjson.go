// Package strictjson is the containerization-helper's one strict JSON
// reader (RFC 8259), shared by the runtime codecs (package codec), the
// image reader (package image) and the state store (package state). It
// accepts exactly one JSON value with nothing but white space after it,
// in valid UTF-8, and refuses what encoding/json lets through silently:
//
//   - a duplicate object key at any depth (encoding/json keeps the last
//     one); with FoldKeys, also two keys that encoding/json would match to
//     the same struct field (it matches names case-insensitively, so
//     {"size":1,"Size":2} is a duplicate, as are "K" and the Kelvin sign);
//   - nesting deeper than MaxDepth (default 32);
//   - a \u escape that is a lone surrogate (refused, not replaced);
//   - with Key set, an object key Key refuses;
//   - a document over MaxBytes, checked before anything is parsed.
//
// One hand-written pass does all of this (json.Decoder.Token, the other
// way to see duplicate keys, decodes at about 4 MB/s); the codec's
// FuzzParse checks it against encoding/json. Errors are *Error: a JSON
// path ($["data"][3]) and a reason, never a value (keys in a path are
// quoted and cut to 64 bytes).
package strictjson

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting cap when Options.MaxDepth is 0.
const DefaultMaxDepth = 32

// Options shape one parse; the zero value is exact keys, depth 32, no
// size cap.
type Options struct {
	// MaxBytes caps the document (0: no cap).
	MaxBytes int
	// MaxDepth caps nesting of objects and arrays (0: DefaultMaxDepth).
	MaxDepth int
	// FoldKeys also refuses two keys of one object that fold to the same
	// name the way encoding/json matches struct fields; set it for a
	// document decoded into structs.
	FoldKeys bool
	// Key, when set, must accept every object key.
	Key func(string) bool
}

func (o Options) maxDepth() int {
	if o.MaxDepth > 0 {
		return o.MaxDepth
	}
	return DefaultMaxDepth
}

// Error is why a document was refused.
type Error struct {
	// Msg names the place and the reason, never a value.
	Msg string
	// Partial reports a document that ended too early (truncated).
	Partial bool
	// TooLarge reports a document over MaxBytes.
	TooLarge bool
}

func (e *Error) Error() string { return e.Msg }

// Parse checks b and returns its single JSON value as a tree:
// map[string]any for objects, []any for arrays, string, json.Number, bool
// or nil. Errors: *Error.
func Parse(b []byte, o Options) (any, error) {
	if o.MaxBytes > 0 && len(b) > o.MaxBytes {
		return nil, &Error{Msg: strconv.Itoa(len(b)) + " bytes, over the " + strconv.Itoa(o.MaxBytes) + "-byte cap", TooLarge: true}
	}
	if !utf8.Valid(b) {
		return nil, &Error{Msg: "not valid UTF-8"}
	}
	p := &parser{b: b, o: o}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.b) {
		return nil, &Error{Msg: "data after the document at byte " + strconv.Itoa(p.i)}
	}
	return v, nil
}

// Decode checks b with Parse and decodes it into v with encoding/json;
// unknown fields are
// refused unless tolerate is set. Set o.FoldKeys: encoding/json matches
// names case-insensitively. Errors: *Error, or encoding/json's.
func Decode(b []byte, v any, tolerate bool, o Options) error {
	if _, err := Parse(b, o); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if !tolerate {
		dec.DisallowUnknownFields()
	}
	return dec.Decode(v)
}

// foldKey folds k as encoding/json does when it matches a key to a field
// name (bytes.EqualFold): each rune replaced by the smallest rune of its
// simple case-folding orbit, so "K", "k" and the Kelvin sign agree.
func foldKey(k string) string {
	return strings.Map(func(r rune) rune {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				return r2
			}
			r = r2
		}
	}, k)
}

// parser is a strict JSON parser over one document.
type parser struct {
	b    []byte
	i    int
	o    Options
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
		return &Error{Msg: p.where() + ": partial document", Partial: true}
	}
	return &Error{Msg: p.where() + ": " + msg + " at byte " + strconv.Itoa(p.i)}
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
		if depth >= p.o.maxDepth() {
			return nil, &Error{Msg: p.where() + ": nested deeper than " + strconv.Itoa(p.o.maxDepth())}
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
	var folded map[string]bool // FoldKeys: the folded keys seen
	if p.o.FoldKeys {
		folded = map[string]bool{}
	}
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
		if p.o.Key != nil && !p.o.Key(k) {
			return nil, &Error{Msg: p.where() + ": key not allowed here"}
		}
		if _, dup := m[k]; dup {
			return nil, &Error{Msg: p.where() + ": duplicate key"}
		}
		if folded != nil {
			f := foldKey(k)
			if folded[f] {
				return nil, &Error{Msg: p.where() + ": duplicate key (as encoding/json matches names)"}
			}
			folded[f] = true
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
