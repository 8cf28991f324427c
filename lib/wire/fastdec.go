package wire

import (
	"encoding"
	"reflect"
	"strings"
)

// A decPlan is a type's compiled decoding table: what Conform checks and
// what the msgpack decoder then does, done in one pass over the body. Only
// types built from strings, bools, integers, []byte, slices, maps with
// string keys, pointers and plain structs (no embedded fields, no
// custom decoders) get a plan; any other type is decoded as before
// (Conform, then the msgpack decoder).
type decPlan struct {
	kind   reflect.Kind
	typ    reflect.Type
	bin    bool     // a []byte: msgpack bin
	elem   *decPlan // pointer, slice and map elements
	fields map[string]decField
}

type decField struct {
	idx  int
	plan *decPlan
}

var (
	binUnmarshalerType  = reflect.TypeOf((*encoding.BinaryUnmarshaler)(nil)).Elem()
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

// planFor returns t's plan, or nil when t must take the general path.
func planFor(t reflect.Type) *decPlan { return decPlans.get(t) }

// customDecoded reports whether msgpack would decode t (or *t) with a
// method rather than by its kind.
func customDecoded(t reflect.Type) bool {
	return implementsAny(t, customDecType, unmarshalType, binUnmarshalerType, textUnmarshalerType)
}

func buildPlan(t reflect.Type, building map[reflect.Type]*decPlan) *decPlan {
	if p, ok := building[t]; ok {
		return p
	}
	if t == rawType || customDecoded(t) {
		return nil
	}
	p := &decPlan{kind: t.Kind(), typ: t}
	building[t] = p
	ok := true
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	case reflect.Pointer:
		p.elem = buildPlan(t.Elem(), building)
		ok = p.elem != nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			p.bin = true
			break
		}
		p.elem = buildPlan(t.Elem(), building)
		ok = p.elem != nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String || customDecoded(t.Key()) {
			ok = false
			break
		}
		p.elem = buildPlan(t.Elem(), building)
		ok = p.elem != nil
	case reflect.Struct:
		p.fields = map[string]decField{}
		for i := 0; i < t.NumField() && ok; i++ {
			sf := t.Field(i)
			if sf.Anonymous || sf.Name == "_msgpack" {
				ok = false
				break
			}
			if !sf.IsExported() {
				continue
			}
			tag := sf.Tag.Get("msgpack")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if name == "" || strings.Contains(opts, "inline") {
				ok = false // msgpack's default name or inlining: not ours to mirror
				break
			}
			fp := buildPlan(sf.Type, building)
			if fp == nil {
				ok = false
				break
			}
			p.fields[name] = decField{idx: i, plan: fp}
		}
	default:
		ok = false
	}
	if !ok {
		delete(building, t)
		return nil
	}
	return p
}

// decode decodes body into rv (addressable, zero) following p, with
// the same checks, in the same order, and the same errors as Conform.
func (c *conformer) decode(p *decPlan, rv reflect.Value) error {
	switch p.kind {
	case reflect.String:
		s, ok := c.cur.strBytes()
		if !ok {
			return c.bad("a str")
		}
		rv.SetString(string(s))
	case reflect.Bool:
		b, ok := c.cur.bool()
		if !ok {
			return c.bad("a bool")
		}
		rv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := c.cur.int()
		if !ok || rv.OverflowInt(i) {
			return c.bad("an integer in range")
		}
		rv.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, ok := c.cur.uint()
		if !ok || rv.OverflowUint(u) {
			return c.bad("a non-negative integer in range")
		}
		rv.SetUint(u)
	case reflect.Pointer:
		e := reflect.New(p.elem.typ)
		if err := c.decode(p.elem, e.Elem()); err != nil {
			return err
		}
		rv.Set(e)
	case reflect.Slice:
		if p.bin {
			b, ok := c.cur.binBytes()
			if !ok {
				return c.bad("bin")
			}
			out := make([]byte, len(b))
			copy(out, b)
			rv.SetBytes(out)
			return nil
		}
		n, ok := c.arrayLen()
		if !ok {
			return c.bad("an array")
		}
		s := reflect.MakeSlice(p.typ, n, n)
		for i := 0; i < n; i++ {
			c.push(nil, i)
			if err := c.decode(p.elem, s.Index(i)); err != nil {
				return err
			}
			c.pop()
		}
		rv.Set(s)
	case reflect.Map:
		n, ok := c.cur.mapLen()
		if !ok {
			return c.bad("a map")
		}
		if p.typ == stringMapType {
			return c.decodeStringMap(rv, n)
		}
		m := reflect.MakeMapWithSize(p.typ, n)
		for i := 0; i < n; i++ {
			k, _ := c.cur.strBytes()
			c.push(k, 0)
			e := reflect.New(p.elem.typ).Elem()
			if err := c.decode(p.elem, e); err != nil {
				return err
			}
			c.pop()
			m.SetMapIndex(reflect.ValueOf(string(k)).Convert(p.typ.Key()), e)
		}
		rv.Set(m)
	case reflect.Struct:
		n, ok := c.cur.mapLen()
		if !ok {
			return c.bad("a map")
		}
		for i := 0; i < n; i++ {
			k, _ := c.cur.strBytes()
			f, known := p.fields[string(k)]
			if !known {
				if c.strict {
					c.push(k, 0)
					return Errorf(CodeRequestUnknownField, "unknown field %s", c.path())
				}
				c.cur.skip()
				continue
			}
			c.push(k, 0)
			if err := c.decode(f.plan, rv.Field(f.idx)); err != nil {
				return err
			}
			c.pop()
		}
	}
	return nil
}

// decodeStringMap decodes the n entries of a map[string]string into rv.
func (c *conformer) decodeStringMap(rv reflect.Value, n int) error {
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		k, _ := c.cur.strBytes()
		c.push(k, 0)
		s, ok := c.cur.strBytes()
		if !ok {
			return c.bad("a str")
		}
		c.pop()
		m[string(k)] = string(s)
	}
	rv.Set(reflect.ValueOf(m))
	return nil
}

// unmarshalFast decodes body into v in one pass when v's type has a plan
// and *v is zero (so the result is exactly what Conform plus the msgpack
// decoder give); handled is false otherwise. On error *v is left zero.
func unmarshalFast(body []byte, v any, strict bool) (handled bool, err error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return false, nil
	}
	p := planFor(rv.Type().Elem())
	if p == nil {
		return false, nil
	}
	e := rv.Elem()
	if !e.IsZero() {
		return false, nil
	}
	c := conformer{cur: cursor{b: body}, strict: strict}
	c.stack = c.buf[:0]
	if err := c.decode(p, e); err != nil {
		e.SetZero()
		return true, err
	}
	return true, nil
}

// decPlans caches compiled decoders per type.
var decPlans = &planCache[decPlan]{build: buildPlan}
