package outstream

import (
	"encoding/binary"
	"net"
)

// AppendDataFrame appends to dst one complete wire frame (lib/wire,
// "Frame layout") carrying a data stream frame with the bytes b, encoded
// exactly as wire.Marshal(&wire.StreamFrame{T: wire.StreamData, B: b})
// would (a test checks it), but without the intermediate payload copy:
//
//	offset 0, 4 bytes: payload length N, big-endian uint32
//	offset 4: 0x82 (map of 2), 0xa1 'b', bin8/16/32 header, b...,
//	          0xa1 't', 0xa4 "data"
//
// Writer sends output as such frames (through DataWriter); other frames
// are encoded with wire.Marshal. b must not be empty (an empty B is omitted by the
// encoder; callers never send empty data).
func AppendDataFrame(dst, b []byte) []byte {
	dst = appendDataHeader(dst, len(b))
	dst = append(dst, b...)
	return append(dst, dataTrailer...)
}

// appendDataHeader appends a data frame's bytes up to its output: the
// frame length, the map header, the key "b" and the bin header for n
// bytes.
func appendDataHeader(dst []byte, n int) []byte {
	var bin []byte
	switch {
	case n <= 0xff:
		bin = []byte{0xc4, byte(n)}
	case n <= 0xffff:
		bin = []byte{0xc5, byte(n >> 8), byte(n)}
	default:
		bin = []byte{0xc6, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(bin[1:], uint32(n))
	}
	payload := 1 + 2 + len(bin) + n + len(dataTrailer)
	dst = binary.BigEndian.AppendUint32(dst, uint32(payload))
	dst = append(dst, 0x82, 0xa1, 'b')
	return append(dst, bin...)
}

// FrameMax is the most output one data frame carries.
const FrameMax = 256 << 10

// dataTrailer ends every data frame: 0xa1 't', 0xa4 "data".
var dataTrailer = []byte{0xa1, 't', 0xa4, 'd', 'a', 't', 'a'}

// DataWriter writes output as data frames, byte for byte what
// AppendDataFrame makes, without copying it: each frame is its header,
// a slice of the output and the trailer, and all frames go out in one
// writev (net.Buffers) when the connection supports it. Its scratch space
// is reused; a DataWriter is for one goroutine.
type DataWriter struct {
	hdrs []byte
	bufs net.Buffers
}

// Write writes b (not empty) to c as data frames of at most FrameMax
// bytes each.
func (w *DataWriter) Write(c net.Conn, b []byte) error {
	w.hdrs, w.bufs = w.hdrs[:0], w.bufs[:0]
	for len(b) > 0 {
		n := min(len(b), FrameMax)
		start := len(w.hdrs)
		w.hdrs = appendDataHeader(w.hdrs, n)
		w.bufs = append(w.bufs, w.hdrs[start:len(w.hdrs):len(w.hdrs)], b[:n], dataTrailer)
		b = b[n:]
	}
	bufs := w.bufs // WriteTo consumes its receiver
	_, err := bufs.WriteTo(c)
	return err
}

// IsDataFrame reports whether payload (a frame's payload, without the
// length) is exactly the canonical encoding of a data stream frame with
// a non-empty b: the layout AppendDataFrame writes, with the smallest bin
// header for its length and nothing after the trailer. Such a payload is
// what wire.DecodeStreamFrame accepts as a data frame and wire.Marshal
// would write for it (a fuzz test checks both), so a relay may take its
// output (DataOf) without decoding it.
func IsDataFrame(payload []byte) bool {
	_, ok := DataOf(payload)
	return ok
}

// DataOf returns the output a data frame's payload carries (a slice of
// payload) when IsDataFrame(payload), and false otherwise.
func DataOf(payload []byte) ([]byte, bool) {
	p := payload
	if len(p) < 5 || p[0] != 0x82 || p[1] != 0xa1 || p[2] != 'b' {
		return nil, false
	}
	var n, h int
	switch p[3] {
	case 0xc4:
		n, h = int(p[4]), 2
	case 0xc5:
		if len(p) < 6 {
			return nil, false
		}
		n, h = int(binary.BigEndian.Uint16(p[4:])), 3
		if n <= 0xff {
			return nil, false
		}
	case 0xc6:
		if len(p) < 8 {
			return nil, false
		}
		n, h = int(binary.BigEndian.Uint32(p[4:])), 5
		if n <= 0xffff {
			return nil, false
		}
	default:
		return nil, false
	}
	if n == 0 || len(p) != 3+h+n+len(dataTrailer) || string(p[3+h+n:]) != string(dataTrailer) {
		return nil, false
	}
	return p[3+h : 3+h+n], true
}
