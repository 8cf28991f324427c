package image

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode"
)

// maxJSONDepth bounds the nesting of any document this package decodes.
const maxJSONDepth = 32

// errJSON is the internal cause for a document that is not strict JSON.
var errJSON = errors.New("not a single JSON value without duplicate keys")

// checkJSON reports an error unless b is exactly one JSON value, nested at
// most maxJSONDepth deep, whose objects never repeat a key. Keys are
// compared after folding them the way encoding/json matches field names
// (case-insensitively), so {"size":1,"Size":2} is a duplicate: json would
// silently keep the last, and another reader might keep the first.
func checkJSON(b []byte) error {
	type frame struct {
		obj     bool
		wantKey bool
		seen    map[string]struct{}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var stack []*frame
	values := 0
	done := func() {
		if len(stack) == 0 {
			values++
			return
		}
		if top := stack[len(stack)-1]; top.obj {
			top.wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.obj && top.wantKey {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:len(stack)-1]
					done()
					continue
				}
				k, ok := tok.(string)
				if !ok {
					return errJSON
				}
				f := foldKey(k)
				if _, dup := top.seen[f]; dup {
					return errors.New("duplicate object key")
				}
				top.seen[f] = struct{}{}
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxJSONDepth {
				return errors.New("JSON nested too deep")
			}
			f := &frame{obj: tok == json.Delim('{')}
			if f.obj {
				f.wantKey, f.seen = true, map[string]struct{}{}
			}
			stack = append(stack, f)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			done()
		default:
			done()
		}
		if values > 1 {
			return errJSON
		}
	}
	if values != 1 || len(stack) != 0 {
		return errJSON
	}
	return nil
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

// decodeStrict checks b with checkJSON and decodes it into v; unknown
// fields are refused unless tolerate is set.
func decodeStrict(b []byte, v any, tolerate bool) error {
	if err := checkJSON(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if !tolerate {
		dec.DisallowUnknownFields()
	}
	return dec.Decode(v)
}
