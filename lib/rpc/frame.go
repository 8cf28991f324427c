package rpc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"

	"hostkit.dev/lib/wire"
)

// readFrame reads one frame (docs/protocol.md, "Frames") from br with
// wire.ReadFrame's contract: io.EOF when br ends before a frame starts;
// frame.empty, frame.too_large (checked before allocating), frame.truncated;
// other read errors as they are (a timeout keeps its net.Error). Only the
// payload is allocated, and a frame already buffered costs no read(2).
func readFrame(br *bufio.Reader, max int) ([]byte, error) {
	hdr, err := br.Peek(4)
	if err != nil {
		if errors.Is(err, io.EOF) && len(hdr) > 0 {
			// Not wrapping io.EOF: that would read as a clean end.
			return nil, &wire.Error{Code: wire.CodeFrameTruncated, Msg: "frame header truncated", Retry: wire.RetrySafe, Err: io.ErrUnexpectedEOF}
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if err := wire.CheckLength(n, max); err != nil {
		return nil, err
	}
	br.Discard(4)
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, &wire.Error{Code: wire.CodeFrameTruncated, Msg: "frame payload truncated", Retry: wire.RetrySafe, Err: io.ErrUnexpectedEOF}
		}
		return nil, err
	}
	return buf, nil
}

// beginFrame starts a frame in b's storage: a 4-byte length placeholder,
// to which the caller appends the payload.
func beginFrame(b []byte) []byte { return append(b[:0], 0, 0, 0, 0) }

// finishFrame fills in the length of a frame begun with beginFrame. It
// refuses an empty payload (frame.empty) and one over max (frame.too_large;
// max <= 0 means wire.DefaultMaxFrame).
func finishFrame(b []byte, max int) ([]byte, error) {
	n := len(b) - 4
	if err := wire.CheckLength(uint32(min(n, 1<<32-1)), max); err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(b, uint32(n))
	return b, nil
}

// maxKeptBuf bounds the write buffer a connection keeps between frames, so
// one large answer does not pin its memory for the connection's life.
const maxKeptBuf = 64 << 10

// keepBuf returns b for reuse, or nil when it grew past maxKeptBuf.
func keepBuf(b []byte) []byte {
	if cap(b) > maxKeptBuf {
		return nil
	}
	return b[:0]
}
