package wire

import (
	"encoding"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/vmihailenco/msgpack/v5"
)

// CanonicalAppender is implemented by a type that appends its own
// canonical encoding (one value) to b. Marshal calls it instead of the
// msgpack encoder's reflection; a type that implements it should also
// implement msgpack.CustomEncoder with the same output, for the general
// path.
type CanonicalAppender interface {
	AppendCanonical(b []byte) ([]byte, error)
}

// An encPlan is a type's compiled encoding table for Marshal: the same
// output as the msgpack encoder with compact ints and omitted empty
// fields, produced directly in canonical form. Types built from strings,
// bools, integers, []byte, slices, maps with string keys, pointers, plain
// structs whose fields are declared in bytewise order of their tags, and
// pointer types implementing CanonicalAppender get a plan; anything else
// takes the msgpack encoder.
type encPlan struct {
	kind     reflect.Kind
	bin      bool         // a []byte: msgpack bin
	appender bool         // a pointer implementing CanonicalAppender
	strMap   bool         // exactly map[string]string
	hint     atomic.Int64 // size of the last encoding (top-level plans)
	elem     *encPlan     // pointer, slice and map elements
	fields   []encField
}

type encField struct {
	idx  int
	key  []byte // the encoded key
	plan *encPlan
}

var (
	appenderType      = reflect.TypeOf((*CanonicalAppender)(nil)).Elem()
	customEncType     = reflect.TypeOf((*msgpack.CustomEncoder)(nil)).Elem()
	marshalerType     = reflect.TypeOf((*msgpack.Marshaler)(nil)).Elem()
	binMarshalerType  = reflect.TypeOf((*encoding.BinaryMarshaler)(nil)).Elem()
	textMarshalerType = reflect.TypeOf((*encoding.TextMarshaler)(nil)).Elem()
	zeroerType        = reflect.TypeOf((*interface{ IsZero() bool })(nil)).Elem()
	stringMapType     = reflect.TypeOf(map[string]string(nil))
)

// appendStringMap appends m with its keys sorted bytewise.
func appendStringMap(b []byte, m map[string]string) []byte {
	var arr [16]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = AppendMapHeader(b, len(keys))
	for _, k := range keys {
		b = AppendStr(AppendStr(b, k), m[k])
	}
	return b
}

func encPlanFor(t reflect.Type) *encPlan { return encPlans.get(t) }

// customEncoded reports whether msgpack would encode t with a method (or
// test it for emptiness with one).
func customEncoded(t reflect.Type) bool {
	return implementsAny(t, customEncType, marshalerType, binMarshalerType, textMarshalerType, zeroerType)
}

func buildEncPlan(t reflect.Type, building map[reflect.Type]*encPlan) *encPlan {
	if p, ok := building[t]; ok {
		return p
	}
	if t.Kind() == reflect.Pointer && t.Implements(appenderType) {
		return &encPlan{kind: reflect.Pointer, appender: true}
	}
	if t == rawType || customEncoded(t) {
		return nil
	}
	p := &encPlan{kind: t.Kind()}
	building[t] = p
	ok := true
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	case reflect.Pointer:
		p.elem = buildEncPlan(t.Elem(), building)
		ok = p.elem != nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			p.bin = true
			break
		}
		p.elem = buildEncPlan(t.Elem(), building)
		ok = p.elem != nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String || customEncoded(t.Key()) {
			ok = false
			break
		}
		p.strMap = t == stringMapType
		p.elem = buildEncPlan(t.Elem(), building)
		ok = p.elem != nil
	case reflect.Struct:
		prev := ""
		for i := 0; i < t.NumField() && ok; i++ {
			sf := t.Field(i)
			if sf.Anonymous || sf.Name == "_msgpack" {
				ok = false
				break
			}
			if !sf.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(sf.Tag.Get("msgpack"), ",")
			if name == "-" {
				continue
			}
			if name == "" || strings.Contains(opts, "inline") || (len(p.fields) > 0 && name <= prev) {
				ok = false // untagged, inlined or out of order: the msgpack encoder's business
				break
			}
			fp := buildEncPlan(sf.Type, building)
			if fp == nil {
				ok = false
				break
			}
			prev = name
			p.fields = append(p.fields, encField{idx: i, key: AppendStr(nil, name), plan: fp})
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

// empty reports whether msgpack's omit-empty rule drops v.
func (p *encPlan) empty(v reflect.Value) bool {
	switch p.kind {
	case reflect.String, reflect.Slice, reflect.Map:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Pointer:
		return v.IsNil()
	case reflect.Struct:
		for _, f := range p.fields {
			if !f.plan.empty(v.Field(f.idx)) {
				return false
			}
		}
		return true
	}
	return false
}

// encode appends v. Values msgpack encodes as nil (a nil pointer, slice or
// map that is not an omitted field) come out as nil too, which Validate
// then refuses, as it refuses the msgpack encoder's output.
func (p *encPlan) encode(b []byte, v reflect.Value) ([]byte, error) {
	switch p.kind {
	case reflect.String:
		return AppendStr(b, v.String()), nil
	case reflect.Bool:
		return AppendBool(b, v.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return AppendInt(b, v.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return AppendUint(b, v.Uint()), nil
	case reflect.Pointer:
		if v.IsNil() {
			return append(b, 0xc0), nil
		}
		if p.appender {
			return v.Interface().(CanonicalAppender).AppendCanonical(b)
		}
		return p.elem.encode(b, v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			return append(b, 0xc0), nil
		}
		if p.bin {
			return AppendBin(b, v.Bytes()), nil
		}
		n := v.Len()
		b = AppendArrayHeader(b, n)
		var err error
		for i := 0; i < n; i++ {
			if b, err = p.elem.encode(b, v.Index(i)); err != nil {
				return b, err
			}
		}
		return b, nil
	case reflect.Map:
		if v.IsNil() {
			return append(b, 0xc0), nil
		}
		if p.strMap {
			return appendStringMap(b, v.Interface().(map[string]string)), nil
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(x, y reflect.Value) int { return strings.Compare(x.String(), y.String()) })
		b = AppendMapHeader(b, len(keys))
		var err error
		for _, k := range keys {
			b = AppendStr(b, k.String())
			if b, err = p.elem.encode(b, v.MapIndex(k)); err != nil {
				return b, err
			}
		}
		return b, nil
	case reflect.Struct:
		n := 0
		for _, f := range p.fields {
			if !f.plan.empty(v.Field(f.idx)) {
				n++
			}
		}
		b = AppendMapHeader(b, n)
		var err error
		for _, f := range p.fields {
			fv := v.Field(f.idx)
			if f.plan.empty(fv) {
				continue
			}
			b = append(b, f.key...)
			if b, err = f.plan.encode(b, fv); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	return b, Errorf(CodeInternal, "no encoding for kind %s", p.kind)
}

// marshalFast encodes v with its plan; handled is false when v's type has
// none (or v is a nil pointer), and Marshal takes the msgpack encoder.
func marshalFast(v any) (b []byte, handled bool, err error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil, false, nil
	}
	p := encPlanFor(rv.Type())
	if p == nil {
		return nil, false, nil
	}
	b, err = p.encode(make([]byte, 0, max(64, p.hint.Load())), rv)
	if err != nil {
		return nil, true, Wrap(CodeInternal, "body could not be encoded", err)
	}
	if err := Validate(b, Limits{}); err != nil {
		return nil, true, Wrap(CodeInternal, "body encoding is not canonical", err)
	}
	p.hint.Store(int64(len(b)))
	return b, true, nil
}

// encPlans caches compiled encoders per type.
var encPlans = &planCache[encPlan]{build: buildEncPlan}
