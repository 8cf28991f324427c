package inject

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// maxDepth bounds JSON nesting.
const maxDepth = 64

// node is a JSON value that keeps object member order: exactly one of obj,
// arr or raw (a scalar's encoding) is used.
type node struct {
	obj  []member
	arr  []*node
	raw  json.RawMessage
	kind byte // '{', '[' or 0 for a scalar
}

type member struct {
	key string
	val *node
}

// Body sets the JSON string at RFC 6901 pointer ptr in the body to value.
// The body must be one JSON value without duplicate object keys at any
// depth. The pointer's parent must exist; an object member is added or
// replaced, an array element (index < length) replaced; "" replaces the
// whole document. Errors: egress.injection_failed.
func Body(body []byte, ptr string, value []byte) ([]byte, error) {
	toks, err := parsePointer(ptr)
	if err != nil {
		return nil, err
	}
	root, err := parseJSON(body)
	if err != nil {
		return nil, wire.Wrap(egressdapi.CodeInjectionFailed, "body is not a JSON document without duplicate keys", err)
	}
	if !utf8.Valid(value) {
		return nil, wire.Errorf(egressdapi.CodeInjectionFailed, "a body target needs a UTF-8 value")
	}
	str, err := json.Marshal(string(value))
	if err != nil {
		return nil, wire.Wrap(egressdapi.CodeInjectionFailed, "value does not encode", err)
	}
	leaf := &node{raw: str}
	if len(toks) == 0 {
		return str, nil
	}
	parent := root
	for _, t := range toks[:len(toks)-1] {
		if parent = child(parent, t); parent == nil {
			return nil, wire.Errorf(egressdapi.CodeInjectionFailed, "body pointer's parent does not exist")
		}
	}
	last := toks[len(toks)-1]
	switch parent.kind {
	case '{':
		for i := range parent.obj {
			if parent.obj[i].key == last {
				parent.obj[i].val = leaf
				return encode(root), nil
			}
		}
		parent.obj = append(parent.obj, member{key: last, val: leaf})
	case '[':
		i, ok := index(last, len(parent.arr))
		if !ok {
			return nil, wire.Errorf(egressdapi.CodeInjectionFailed, "body pointer's array index is out of range")
		}
		parent.arr[i] = leaf
	default:
		return nil, wire.Errorf(egressdapi.CodeInjectionFailed, "body pointer's parent is not an object or array")
	}
	return encode(root), nil
}

// parsePointer splits an RFC 6901 pointer into unescaped reference tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !utf8.ValidString(p) {
		return nil, wire.Errorf(egressdapi.CodeInjectionFailed, "body pointer is not UTF-8")
	}
	if p[0] != '/' {
		return nil, wire.Errorf(egressdapi.CodeInjectionFailed, "body pointer must be empty or start with /")
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		for j := 0; j < len(s); j++ {
			if s[j] == '~' && (j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1')) {
				return nil, wire.Errorf(egressdapi.CodeInjectionFailed, "body pointer holds a bad ~ escape")
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func child(n *node, tok string) *node {
	switch n.kind {
	case '{':
		for _, m := range n.obj {
			if m.key == tok {
				return m.val
			}
		}
	case '[':
		if i, ok := index(tok, len(n.arr)); ok {
			return n.arr[i]
		}
	}
	return nil
}

// index parses an RFC 6901 array index: "0" or digits without a leading zero.
func index(tok string, n int) (int, bool) {
	if tok == "" || len(tok) > 9 || (tok[0] == '0' && len(tok) > 1) {
		return 0, false
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || i >= n || strings.TrimLeft(tok, "0123456789") != "" {
		return 0, false
	}
	return i, true
}

var errDuplicate = errors.New("duplicate object key")

func parseJSON(b []byte) (*node, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	n, err := parseValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return n, nil
}

func parseValue(d *json.Decoder, depth int) (*node, error) {
	if depth > maxDepth {
		return nil, errors.New("JSON nested too deeply")
	}
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		n, seen := &node{kind: '{'}, map[string]bool{}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			if seen[k] {
				return nil, errDuplicate
			}
			seen[k] = true
			v, err := parseValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			n.obj = append(n.obj, member{key: k, val: v})
		}
		_, err := d.Token()
		return n, err
	case json.Delim('['):
		n := &node{kind: '['}
		for d.More() {
			v, err := parseValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			n.arr = append(n.arr, v)
		}
		_, err := d.Token()
		return n, err
	}
	raw, err := json.Marshal(tok)
	return &node{raw: raw}, err
}

func encode(n *node) []byte {
	var b bytes.Buffer
	n.write(&b)
	return b.Bytes()
}

func (n *node) write(b *bytes.Buffer) {
	switch n.kind {
	case '{':
		b.WriteByte('{')
		for i, m := range n.obj {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(m.key)
			b.Write(k)
			b.WriteByte(':')
			m.val.write(b)
		}
		b.WriteByte('}')
	case '[':
		b.WriteByte('[')
		for i, v := range n.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			v.write(b)
		}
		b.WriteByte(']')
	default:
		b.Write(n.raw)
	}
}
