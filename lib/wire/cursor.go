package wire

import (
	"encoding/binary"
	"math"
)

// cursor reads values from a payload that Validate has already accepted, so
// it trusts lengths and forms; it still checks types, because a canonical
// value can have the wrong type for a field.
type cursor struct {
	b   []byte
	off int
}

func (c *cursor) peek() byte { return c.b[c.off] }

func (c *cursor) be(n int) uint64 {
	p := c.b[c.off : c.off+n]
	c.off += n
	switch n {
	case 1:
		return uint64(p[0])
	case 2:
		return uint64(binary.BigEndian.Uint16(p))
	case 4:
		return uint64(binary.BigEndian.Uint32(p))
	default:
		return binary.BigEndian.Uint64(p)
	}
}

// mapLen reads a map header; ok is false when the value is not a map.
func (c *cursor) mapLen() (int, bool) {
	t := c.peek()
	switch {
	case t >= 0x80 && t <= 0x8f:
		c.off++
		return int(t & 0x0f), true
	case t == 0xde:
		c.off++
		return int(c.be(2)), true
	case t == 0xdf:
		c.off++
		return int(c.be(4)), true
	}
	return 0, false
}

// strBytes reads a str and returns its bytes (aliasing the payload).
func (c *cursor) strBytes() ([]byte, bool) {
	t := c.peek()
	var n int
	switch {
	case t >= 0xa0 && t <= 0xbf:
		c.off++
		n = int(t & 0x1f)
	case t == 0xd9:
		c.off++
		n = int(c.be(1))
	case t == 0xda:
		c.off++
		n = int(c.be(2))
	case t == 0xdb:
		c.off++
		n = int(c.be(4))
	default:
		return nil, false
	}
	s := c.b[c.off : c.off+n]
	c.off += n
	return s, true
}

// binBytes reads a bin and returns its bytes (aliasing the payload).
func (c *cursor) binBytes() ([]byte, bool) {
	t := c.peek()
	var n int
	switch t {
	case 0xc4:
		c.off++
		n = int(c.be(1))
	case 0xc5:
		c.off++
		n = int(c.be(2))
	case 0xc6:
		c.off++
		n = int(c.be(4))
	default:
		return nil, false
	}
	s := c.b[c.off : c.off+n]
	c.off += n
	return s, true
}

// uint reads a non-negative integer.
func (c *cursor) uint() (uint64, bool) {
	t := c.peek()
	switch {
	case t <= 0x7f:
		c.off++
		return uint64(t), true
	case t >= 0xcc && t <= 0xcf:
		c.off++
		return c.be(1 << (t - 0xcc)), true
	}
	return 0, false
}

// int reads any integer that fits int64.
func (c *cursor) int() (int64, bool) {
	t := c.peek()
	switch {
	case t <= 0x7f:
		c.off++
		return int64(t), true
	case t >= 0xe0:
		c.off++
		return int64(int8(t)), true
	case t >= 0xcc && t <= 0xcf:
		start := c.off
		c.off++
		u := c.be(1 << (t - 0xcc))
		if u > 1<<63-1 {
			c.off = start // leave the value unread, like every other !ok
			return 0, false
		}
		return int64(u), true
	case t >= 0xd0 && t <= 0xd3:
		c.off++
		n := 1 << (t - 0xd0)
		return signExtend(c.be(n), n), true
	}
	return 0, false
}

func (c *cursor) bool() (bool, bool) {
	switch c.peek() {
	case 0xc2:
		c.off++
		return false, true
	case 0xc3:
		c.off++
		return true, true
	}
	return false, false
}

// skip moves past one value and returns its encoded bytes.
func (c *cursor) skip() []byte {
	start := c.off
	v := validator{b: c.b, off: c.off, lim: Limits{MaxDepth: 1 << 30, MaxElements: math.MaxInt}}
	_ = v.value(1) // already validated
	c.off = v.off
	return c.b[start:c.off]
}
