package wire

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// Conform checks that a validated canonical body fits the Go type of v (a
// pointer): every map key names a field of the struct (or strict is false),
// and every value has the kind the field expects — str for string, bin for
// []byte, an integer in range for integer fields, bool, array, map. Fields
// of type any or msgpack.RawMessage accept any value. Errors:
// request.unknown_field (strict only), frame.malformed; Msg names the field
// path, never a value.
func Conform(body []byte, v any, strict bool) error {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return Errorf(CodeInternal, "Conform needs a pointer")
	}
	c := conformer{cur: cursor{b: body}, strict: strict}
	c.stack = c.buf[:0]
	return c.value(t.Elem())
}

type conformer struct {
	cur    cursor
	strict bool
	stack  []pathSeg
	buf    [8]pathSeg
}

var (
	rawType       = reflect.TypeOf(msgpack.RawMessage(nil))
	customDecType = reflect.TypeOf((*msgpack.CustomDecoder)(nil)).Elem()
	unmarshalType = reflect.TypeOf((*msgpack.Unmarshaler)(nil)).Elem()
)

// pathSeg is one step of the field path being checked: a map key or
// struct field name, or (key nil) an array index. The conformer keeps the
// path on a stack and renders it only when an error names it, so a body
// that conforms costs no string building.
type pathSeg struct {
	key []byte
	idx int
}

func (c *conformer) path() string {
	s := "body"
	for _, p := range c.stack {
		if p.key == nil {
			s += "[" + strconv.Itoa(p.idx) + "]"
		} else {
			s += "." + truncate(string(p.key), 64)
		}
	}
	return s
}

func (c *conformer) push(key []byte, idx int) { c.stack = append(c.stack, pathSeg{key: key, idx: idx}) }
func (c *conformer) pop()                     { c.stack = c.stack[:len(c.stack)-1] }

func (c *conformer) bad(want string) error {
	return Errorf(CodeFrameMalformed, "field %s must be %s", c.path(), want)
}

func (c *conformer) value(t reflect.Type) error {
	if t == rawType || t.Kind() == reflect.Interface ||
		reflect.PointerTo(t).Implements(customDecType) || reflect.PointerTo(t).Implements(unmarshalType) {
		c.cur.skip()
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return c.value(t.Elem())
	case reflect.String:
		if _, ok := c.cur.strBytes(); !ok {
			return c.bad("a str")
		}
	case reflect.Bool:
		if _, ok := c.cur.bool(); !ok {
			return c.bad("a bool")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := c.cur.int()
		if !ok || reflect.Zero(t).OverflowInt(i) {
			return c.bad("an integer in range")
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, ok := c.cur.uint()
		if !ok || reflect.Zero(t).OverflowUint(u) {
			return c.bad("a non-negative integer in range")
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			if _, ok := c.cur.binBytes(); !ok {
				return c.bad("bin")
			}
			return nil
		}
		n, ok := c.arrayLen()
		if !ok {
			return c.bad("an array")
		}
		for i := 0; i < n; i++ {
			c.push(nil, i)
			if err := c.value(t.Elem()); err != nil {
				return err
			}
			c.pop()
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return Errorf(CodeInternal, "map keys must be strings")
		}
		n, ok := c.cur.mapLen()
		if !ok {
			return c.bad("a map")
		}
		for i := 0; i < n; i++ {
			k, _ := c.cur.strBytes()
			c.push(k, 0)
			if err := c.value(t.Elem()); err != nil {
				return err
			}
			c.pop()
		}
	case reflect.Struct:
		return c.structValue(t)
	default:
		return c.bad("a supported kind (no floats)")
	}
	return nil
}

func (c *conformer) structValue(t reflect.Type) error {
	n, ok := c.cur.mapLen()
	if !ok {
		return c.bad("a map")
	}
	fields := fieldsOf(t)
	for i := 0; i < n; i++ {
		k, _ := c.cur.strBytes()
		idx, known := fields.byName[string(k)]
		if !known {
			if c.strict {
				c.push(k, 0)
				return Errorf(CodeRequestUnknownField, "unknown field %s", c.path())
			}
			c.cur.skip()
			continue
		}
		c.push(k, 0)
		if err := c.value(t.Field(idx).Type); err != nil {
			return err
		}
		c.pop()
	}
	return nil
}

func (c *conformer) arrayLen() (int, bool) {
	t := c.cur.peek()
	switch {
	case t >= 0x90 && t <= 0x9f:
		c.cur.off++
		return int(t & 0x0f), true
	case t == 0xdc:
		c.cur.off++
		return int(c.cur.be(2)), true
	case t == 0xdd:
		c.cur.off++
		return int(c.cur.be(4)), true
	}
	return 0, false
}

type structFields struct {
	byName map[string]int
	names  []string // in declaration order
}

var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	f := &structFields{byName: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name := strings.Split(sf.Tag.Get("msgpack"), ",")[0]
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.byName[name] = i
		f.names = append(f.names, name)
	}
	fieldCache.Store(t, f)
	return f
}

// CheckSchema reports an error when the type of v (a struct or pointer to
// one, recursively through fields, slices and maps) cannot be encoded
// canonically by Marshal: a field without a msgpack tag, fields not declared
// in bytewise order of their tags, a float, or a map without string keys.
// api packages call it in tests for every request and response type.
func CheckSchema(v any) error {
	return checkType(reflect.TypeOf(v), map[reflect.Type]bool{})
}

func checkType(t reflect.Type, seen map[reflect.Type]bool) error {
	if t == nil || seen[t] {
		return nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return checkType(t.Elem(), seen)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return Errorf(CodeInternal, "%s: map keys must be strings", t)
		}
		return checkType(t.Elem(), seen)
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return Errorf(CodeInternal, "%s: floats are not allowed on the wire", t)
	case reflect.Struct:
		if t == rawType {
			return nil
		}
		var names []string
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			tag := strings.Split(sf.Tag.Get("msgpack"), ",")[0]
			if tag == "-" {
				continue
			}
			if tag == "" {
				return Errorf(CodeInternal, "%s.%s has no msgpack tag", t, sf.Name)
			}
			names = append(names, tag)
			if err := checkType(sf.Type, seen); err != nil {
				return err
			}
		}
		if !sort.StringsAreSorted(names) {
			return Errorf(CodeInternal, "%s: fields must be declared in bytewise order of their msgpack tags, got %v", t, names)
		}
	}
	return nil
}
