package holder

import "encoding/binary"

// AppendDataFrame appends to dst one complete wire frame (lib/wire,
// "Frame layout") carrying a data stream frame with the bytes b, encoded
// exactly as wire.Marshal(&wire.StreamFrame{T: wire.StreamData, B: b})
// would (a test checks it), but without the intermediate payload copy:
//
//	offset 0, 4 bytes: payload length N, big-endian uint32
//	offset 4: 0x82 (map of 2), 0xa1 'b', bin8/16/32 header, b...,
//	          0xa1 't', 0xa4 "data"
//
// The attach path sends bulk output through it; other frames go through
// rpc.Stream.Send. b must not be empty (an empty B is omitted by the
// encoder; callers never send empty data).
func AppendDataFrame(dst, b []byte) []byte {
	n := len(b)
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
	payload := 1 + 2 + len(bin) + n + 2 + 5
	dst = binary.BigEndian.AppendUint32(dst, uint32(payload))
	dst = append(dst, 0x82, 0xa1, 'b')
	dst = append(dst, bin...)
	dst = append(dst, b...)
	return append(dst, 0xa1, 't', 0xa4, 'd', 'a', 't', 'a')
}
