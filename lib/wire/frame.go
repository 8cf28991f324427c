package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
)

// DefaultMaxFrame is the largest payload accepted by default: 8 MiB
// (8,388,608 bytes), docs/protocol.md, "Frames".
const DefaultMaxFrame = 8 << 20

// Frame layout (wire protocol v1):
//
//	offset 0, 4 bytes: N, payload length, big-endian uint32, 1 <= N <= max
//	offset 4, N bytes: one canonical MessagePack value
//
// The length is checked against max before anything is allocated.

// ReadFrame reads one frame from r and returns its payload. max <= 0 means
// DefaultMaxFrame. Errors: io.EOF when r ends cleanly before a frame starts;
// frame.empty (N = 0), frame.too_large (N > max, nothing allocated),
// frame.truncated (EOF inside the header or payload); other read errors are
// returned as they are (a timeout keeps its net.Error).
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, &Error{Code: CodeFrameTruncated, Msg: "frame header truncated", Retry: RetrySafe, Err: err}
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if err := CheckLength(n, max); err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			// Wrap ErrUnexpectedEOF even when no payload byte arrived, so
			// errors.Is(err, io.EOF) stays true only for a clean end.
			return nil, &Error{Code: CodeFrameTruncated, Msg: "frame payload truncated", Retry: RetrySafe, Err: io.ErrUnexpectedEOF}
		}
		return nil, err
	}
	return buf, nil
}

// CheckLength validates a frame length header against max (<= 0 means
// DefaultMaxFrame): frame.empty for 0, frame.too_large above max.
func CheckLength(n uint32, max int) error {
	if max <= 0 {
		max = DefaultMaxFrame
	}
	if n == 0 {
		return Errorf(CodeFrameEmpty, "frame length is zero")
	}
	if uint64(n) > uint64(max) {
		return Errorf(CodeFrameTooLarge, "frame length %d exceeds the limit of %d bytes", n, max)
	}
	return nil
}

// AppendFrame appends the 4-byte header and payload to dst.
func AppendFrame(dst, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// WriteFrame writes payload as one frame with a single Write call. It
// refuses an empty payload (frame.empty) and one over max (frame.too_large;
// max <= 0 means DefaultMaxFrame).
func WriteFrame(w io.Writer, payload []byte, max int) error {
	if err := CheckLength(uint32(min(uint64(len(payload)), math.MaxUint32)), max); err != nil {
		return err
	}
	buf := make([]byte, 0, 4+len(payload))
	_, err := w.Write(AppendFrame(buf, payload))
	return err
}
