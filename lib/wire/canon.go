package wire

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
)

// Limits bounds what the canonical decoder accepts. The zero value means the
// defaults (DefaultLimits).
type Limits struct {
	// MaxDepth is the deepest nesting of maps and arrays; the top level is 1.
	MaxDepth int
	// MaxElements is the total count of values (keys included) in one payload.
	MaxElements int
}

// DefaultLimits: 32 levels, 1<<20 values. Since every value takes at least
// one byte, no header can claim more elements than bytes remain, so a short
// payload can never cause a large allocation.
var DefaultLimits = Limits{MaxDepth: 32, MaxElements: 1 << 20}

func (l Limits) orDefault() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxElements <= 0 {
		l.MaxElements = DefaultLimits.MaxElements
	}
	return l
}

// Validate reports whether b holds exactly one value in hostkit's canonical
// MessagePack form (docs/protocol.md, "Canonical encoding"): string keys
// sorted bytewise and unique at every depth, shortest integer and length
// headers, non-negative integers in the unsigned forms, valid UTF-8 text, no
// float, ext or nil, nothing after the value. It allocates nothing. Errors
// are *Error with CodeFrameMalformed; Msg names the offset and the rule.
func Validate(b []byte, lim Limits) error {
	v := validator{b: b, lim: lim.orDefault()}
	if err := v.value(1); err != nil {
		return err
	}
	if v.off != len(b) {
		return v.fail("trailing bytes after the value")
	}
	return nil
}

type validator struct {
	b     []byte
	off   int
	elems int
	lim   Limits
}

func (v *validator) fail(rule string) error {
	return &Error{Code: CodeFrameMalformed, Msg: "non-canonical or invalid MessagePack at offset " + itoa(v.off) + ": " + rule, Retry: RetryNever}
}

func (v *validator) need(n int) error {
	if n < 0 || len(v.b)-v.off < n {
		return v.fail("value runs past the end")
	}
	return nil
}

func (v *validator) uintN(n int) (uint64, error) {
	if err := v.need(n); err != nil {
		return 0, err
	}
	p := v.b[v.off : v.off+n]
	v.off += n
	switch n {
	case 1:
		return uint64(p[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), nil
	default:
		return binary.BigEndian.Uint64(p), nil
	}
}

// value checks one value starting at v.off.
func (v *validator) value(depth int) error {
	if depth > v.lim.MaxDepth {
		return v.fail("nesting too deep")
	}
	v.elems++
	if v.elems > v.lim.MaxElements {
		return v.fail("too many elements")
	}
	if err := v.need(1); err != nil {
		return err
	}
	c := v.b[v.off]
	v.off++
	switch {
	case c <= 0x7f, c >= 0xe0: // fixints
		return nil
	case c >= 0x80 && c <= 0x8f:
		return v.mapBody(int(c&0x0f), depth)
	case c >= 0x90 && c <= 0x9f:
		return v.arrayBody(int(c&0x0f), depth)
	case c >= 0xa0 && c <= 0xbf:
		return v.str(int(c & 0x1f))
	}
	switch c {
	case 0xc2, 0xc3:
		return nil
	case 0xc4, 0xc5, 0xc6: // bin 8/16/32 (no fix form)
		w := 1 << (c - 0xc4)
		n, err := v.length(w, binMin(w))
		if err != nil {
			return err
		}
		if err := v.need(n); err != nil {
			return err
		}
		v.off += n
		return nil
	case 0xd9, 0xda, 0xdb: // str 8/16/32
		w := 1 << (c - 0xd9)
		n, err := v.length(w, minLen(w, 31))
		if err != nil {
			return err
		}
		return v.str(n)
	case 0xdc, 0xdd: // array 16/32
		w := 2 << (c - 0xdc)
		n, err := v.length(w, arrMin(w))
		if err != nil {
			return err
		}
		return v.arrayBody(n, depth)
	case 0xde, 0xdf: // map 16/32
		w := 2 << (c - 0xde)
		n, err := v.length(w, arrMin(w))
		if err != nil {
			return err
		}
		return v.mapBody(n, depth)
	case 0xcc, 0xcd, 0xce, 0xcf: // uint 8/16/32/64
		n := 1 << (c - 0xcc)
		u, err := v.uintN(n)
		if err != nil {
			return err
		}
		if !minimalUint(u, n) {
			return v.fail("unsigned integer not in its shortest form")
		}
		return nil
	case 0xd0, 0xd1, 0xd2, 0xd3: // int 8/16/32/64
		n := 1 << (c - 0xd0)
		u, err := v.uintN(n)
		if err != nil {
			return err
		}
		if !minimalInt(signExtend(u, n), n) {
			return v.fail("signed integer not negative or not in its shortest form")
		}
		return nil
	case 0xc0:
		return v.fail("nil is not allowed")
	case 0xca, 0xcb:
		return v.fail("floats are not allowed")
	}
	return v.fail("ext types are not allowed")
}

// length reads an n-byte big-endian length (n = 1, 2 or 4), requires it to
// be at least min (the shortest-form rule: a smaller length has a shorter
// header) and to fit in the bytes that remain.
func (v *validator) length(n int, min uint64) (int, error) {
	u, err := v.uintN(n)
	if err != nil {
		return 0, err
	}
	if u < min {
		return 0, v.fail("length header not in its shortest form")
	}
	if u > uint64(len(v.b)-v.off) {
		return 0, v.fail("length runs past the end")
	}
	return int(u), nil
}

// minLen gives, for a 1-, 2- or 4-byte length header, the smallest length it
// may carry when the type has a fix form holding up to fixMax.
func minLen(n int, fixMax uint64) uint64 {
	switch n {
	case 1:
		return fixMax + 1
	case 2:
		if fixMax+1 > 0x100 {
			return fixMax + 1
		}
		return 0x100
	default:
		return 0x10000
	}
}

func (v *validator) str(n int) error {
	if err := v.need(n); err != nil {
		return err
	}
	if !utf8.Valid(v.b[v.off : v.off+n]) {
		return v.fail("str is not valid UTF-8")
	}
	v.off += n
	return nil
}

func (v *validator) arrayBody(n, depth int) error {
	if n > len(v.b)-v.off {
		return v.fail("array claims more elements than bytes remain")
	}
	for i := 0; i < n; i++ {
		if err := v.value(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

func (v *validator) mapBody(n, depth int) error {
	if n > (len(v.b)-v.off)/2 {
		return v.fail("map claims more entries than bytes remain")
	}
	var prev []byte
	for i := 0; i < n; i++ {
		key, err := v.key()
		if err != nil {
			return err
		}
		if i > 0 && bytes.Compare(prev, key) >= 0 {
			if bytes.Equal(prev, key) {
				return v.fail("duplicate map key")
			}
			return v.fail("map keys not sorted bytewise")
		}
		prev = key
		if err := v.value(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

// key reads a map key, which must be a canonical str.
func (v *validator) key() ([]byte, error) {
	v.elems++
	if v.elems > v.lim.MaxElements {
		return nil, v.fail("too many elements")
	}
	if err := v.need(1); err != nil {
		return nil, err
	}
	c := v.b[v.off]
	v.off++
	var n int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xd9 || c == 0xda || c == 0xdb:
		w := 1 << (c - 0xd9)
		var err error
		if n, err = v.length(w, minLen(w, 31)); err != nil {
			return nil, err
		}
	default:
		return nil, v.fail("map key is not a string")
	}
	start := v.off
	if err := v.str(n); err != nil {
		return nil, err
	}
	return v.b[start:v.off], nil
}

// binMin: bin8 holds any length up to 255; bin16 needs > 255; bin32 > 65535.
func binMin(w int) uint64 {
	if w == 1 {
		return 0
	}
	return minLen(w, 0)
}

// arrMin: array16/map16 need more than 15 (the fix form's max); 32 > 65535.
func arrMin(w int) uint64 {
	if w == 2 {
		return 16
	}
	return 0x10000
}

func minimalUint(u uint64, n int) bool {
	switch n {
	case 1:
		return u > 0x7f
	case 2:
		return u > 0xff
	case 4:
		return u > 0xffff
	default:
		return u > 0xffffffff
	}
}

func signExtend(u uint64, n int) int64 {
	switch n {
	case 1:
		return int64(int8(u))
	case 2:
		return int64(int16(u))
	case 4:
		return int64(int32(u))
	default:
		return int64(u)
	}
}

func minimalInt(i int64, n int) bool {
	if i >= 0 {
		return false // non-negative values use the unsigned forms
	}
	switch n {
	case 1:
		return i < -32
	case 2:
		return i < -128
	case 4:
		return i < -32768
	default:
		return i < -2147483648
	}
}

func itoa(n int) string {
	var buf [20]byte
	i := len(buf)
	if n == 0 {
		return "0"
	}
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return string(buf[i:])
}
