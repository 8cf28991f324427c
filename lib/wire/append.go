package wire

import "encoding/binary"

// The append functions write canonical MessagePack (docs/protocol.md,
// "Canonical encoding") to the end of b and return the extended slice.
// Callers that build maps by hand must emit keys in bytewise order.

// AppendMapHeader appends a map header for n entries in its shortest form.
func AppendMapHeader(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x80|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
	}
}

// AppendArrayHeader appends an array header for n elements in its shortest form.
func AppendArrayHeader(b []byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, 0x90|byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
	}
}

// AppendStr appends s as a str with the shortest header. s must be UTF-8;
// Validate rejects it otherwise.
func AppendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n <= 31:
		b = append(b, 0xa0|byte(n))
	case n <= 0xff:
		b = append(b, 0xd9, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// AppendBin appends p as bin with the shortest header; an empty p is the
// two bytes c4 00.
func AppendBin(b []byte, p []byte) []byte {
	n := len(p)
	switch {
	case n <= 0xff:
		b = append(b, 0xc4, byte(n))
	case n <= 0xffff:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, p...)
}

// AppendBool appends true (c3) or false (c2).
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// AppendUint appends u in the shortest unsigned form.
func AppendUint(b []byte, u uint64) []byte {
	switch {
	case u <= 0x7f:
		return append(b, byte(u))
	case u <= 0xff:
		return append(b, 0xcc, byte(u))
	case u <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(u))
	case u <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(u))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), u)
	}
}

// AppendInt appends i: non-negative values in the unsigned forms, negative
// ones in the shortest signed form.
func AppendInt(b []byte, i int64) []byte {
	switch {
	case i >= 0:
		return AppendUint(b, uint64(i))
	case i >= -32:
		return append(b, byte(i))
	case i >= -128:
		return append(b, 0xd0, byte(i))
	case i >= -32768:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(i))
	case i >= -2147483648:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(i))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(i))
	}
}
