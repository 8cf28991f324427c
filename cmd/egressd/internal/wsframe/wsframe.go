// Package wsframe reads and writes WebSocket frames (RFC 6455 section 5):
// the frame header, masking, and close payloads. It holds no connection
// state: egressd's relay decides what each frame means.
package wsframe

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"unicode/utf8"
)

// Opcodes (RFC 6455 section 5.2).
const (
	OpContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	OpClose        = 0x8
	OpPing         = 0x9
	OpPong         = 0xA
)

// Close status codes used by egressd (RFC 6455 section 7.4.1).
const (
	CloseNormal        = 1000
	CloseGoingAway     = 1001
	CloseProtocolError = 1002
	ClosePolicy        = 1008 // a message that breaks policy (a held value, a placeholder)
	CloseTooBig        = 1009
)

// MaxControlPayload is the most payload bytes a control frame may carry
// (RFC 6455 section 5.5).
const MaxControlPayload = 125

// Header is one frame's header. Length is the payload length in bytes;
// Mask is the masking key when Masked.
type Header struct {
	Fin    bool    // the final fragment of a message (RFC 6455 section 5.2, FIN)
	RSV    byte    // the three reserved bits, as bits 0x4, 0x2, 0x1
	Opcode byte    // 0x0 continuation, 0x1 text, 0x2 binary, 0x8 close, 0x9 ping, 0xA pong (section 5.2)
	Masked bool    // the payload is masked: every client-to-server frame (section 5.3)
	Mask   [4]byte // the masking key; zero when not Masked
	Length int64   // payload bytes, 0 to 2^63-1 (the 7-bit, 16-bit or 64-bit form)
}

// IsControl reports whether the opcode is a control frame's (close,
// ping, pong).
func (h Header) IsControl() bool { return h.Opcode&0x8 != 0 }

// ErrMalformed is a frame that breaks RFC 6455: reserved bits set
// without a negotiated extension (egressd negotiates none), a reserved
// opcode, a control frame that is fragmented or longer than 125 bytes,
// a length not in its shortest encoding or with the top bit set.
var ErrMalformed = errors.New("wsframe: malformed frame")

// ErrTooLarge is a frame whose payload is longer than the reader's bound.
var ErrTooLarge = errors.New("wsframe: frame payload too large")

// ReadHeader reads one frame header from r. A payload longer than max
// bytes is ErrTooLarge (max ≤ 0: no bound). Errors: ErrMalformed,
// ErrTooLarge, or r's (io.EOF before the first byte; io.ErrUnexpectedEOF
// inside the header).
func ReadHeader(r *bufio.Reader, max int64) (Header, error) {
	var h Header
	var b [8]byte
	if _, err := io.ReadFull(r, b[:2]); err != nil {
		return h, err
	}
	h.Fin = b[0]&0x80 != 0
	h.RSV = (b[0] >> 4) & 0x7
	h.Opcode = b[0] & 0xF
	h.Masked = b[1]&0x80 != 0
	n := int64(b[1] & 0x7F)
	switch n {
	case 126:
		if _, err := io.ReadFull(r, b[:2]); err != nil {
			return h, unexpected(err)
		}
		n = int64(binary.BigEndian.Uint16(b[:2]))
		if n < 126 {
			return h, ErrMalformed
		}
	case 127:
		if _, err := io.ReadFull(r, b[:8]); err != nil {
			return h, unexpected(err)
		}
		u := binary.BigEndian.Uint64(b[:8])
		if u>>63 != 0 || u <= 0xFFFF {
			return h, ErrMalformed
		}
		n = int64(u)
	}
	h.Length = n
	if h.Masked {
		if _, err := io.ReadFull(r, h.Mask[:]); err != nil {
			return h, unexpected(err)
		}
	}
	if h.RSV != 0 {
		return h, ErrMalformed
	}
	switch h.Opcode {
	case OpContinuation, OpText, OpBinary:
	case OpClose, OpPing, OpPong:
		if !h.Fin || h.Length > MaxControlPayload {
			return h, ErrMalformed
		}
	default:
		return h, ErrMalformed
	}
	if max > 0 && h.Length > max {
		return h, ErrTooLarge
	}
	return h, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendHeader appends h's encoding to dst, the length in its shortest
// form.
func AppendHeader(dst []byte, h Header) []byte {
	b0 := h.Opcode & 0xF
	if h.Fin {
		b0 |= 0x80
	}
	b0 |= (h.RSV & 0x7) << 4
	var m byte
	if h.Masked {
		m = 0x80
	}
	switch {
	case h.Length < 126:
		dst = append(dst, b0, m|byte(h.Length))
	case h.Length <= 0xFFFF:
		dst = append(dst, b0, m|126)
		dst = binary.BigEndian.AppendUint16(dst, uint16(h.Length))
	default:
		dst = append(dst, b0, m|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(h.Length))
	}
	if h.Masked {
		dst = append(dst, h.Mask[:]...)
	}
	return dst
}

// MaskBytes XORs b with key, b starting at offset pos of the payload
// (masking and unmasking are the same operation, RFC 6455 section 5.3).
func MaskBytes(key [4]byte, pos int64, b []byte) {
	for i := range b {
		b[i] ^= key[(pos+int64(i))&3]
	}
}

// ClosePayload is a close frame's payload: the status code and a reason,
// cut to fit a control frame at a UTF-8 boundary.
func ClosePayload(code uint16, reason string) []byte {
	p := binary.BigEndian.AppendUint16(nil, code)
	for len(p)+len(reason) > MaxControlPayload {
		_, size := utf8.DecodeLastRuneInString(reason)
		reason = reason[:len(reason)-size]
	}
	return append(p, reason...)
}
