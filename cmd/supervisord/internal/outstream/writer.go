package outstream

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"hostkit.dev/lib/wire"
)

// ErrInterrupted is Writer.Data's answer once Interrupt was called.
var ErrInterrupted = errors.New("outstream: writer interrupted")

// sendBuffer is the send buffer asked for on an attach connection: room
// for a few frames of FrameMax bytes, so that a sender hands a whole frame
// to the kernel and the reader takes it in one read, instead of the two
// sides taking turns at the default ~200 KiB (wmem_default). The kernel
// caps it at net.core.wmem_max (and Linux doubles what it grants, for its
// own accounting; SO_SNDBUF reads back the doubled size).
const sendBuffer = 4 * FrameMax

// How a Writer keeps every write(2) from blocking, on Linux (unix(7)): a
// write to a Unix stream socket sleeps only when the bytes the socket has
// allocated for data its peer has not read yet (SIOCOUTQ, which counts
// kernel overhead too) reach its send buffer (SO_SNDBUF). Measured on
// 6.x kernels, n bytes written in one call cost less than n + n/32 +
// 2 KiB of that allocation (768 bytes of overhead per kernel buffer of up
// to 64 KiB of data, and rounding); a Writer counts n + n/4 + skbSlack, so
// that it never reaches the limit. Output is written only while the
// queue stays reserve below the limit, so that the frames that end a
// stream (at most ctrlMax bytes each, several of them) always fit at
// once: the stream.slow_client frame that follows a stalled client's
// last data frame in particular. When output does not fit, the Writer
// waits until the socket reports writable again (which, for a Unix
// socket, is when at most a quarter of the buffer is in use) and checks
// again; it waits for room for at most chunk bytes, so it never waits for
// more than a quarter-full buffer gives.
const (
	skbSlack = 4 << 10
	reserve  = 16 << 10
	ctrlMax  = 1 << 10
	chunk    = 16 << 10
	// frameSlack bounds a data frame's bytes beyond its output: length,
	// map header, key, bin header and trailer (4+1+2+5+7).
	frameSlack = 32
	// ctrlWait bounds the wait for room for a frame that ends a stream;
	// room is reserved for it, so the wait ends at once unless the peer
	// closed or something else took the room.
	ctrlWait = 2 * time.Second
	// blockTimeout bounds each write where the queue cannot be measured
	// (not a Unix socket, or not Linux): a client that takes nothing for
	// that long is cut off, as hops did before they measured.
	blockTimeout = 5 * time.Second
)

// cost is the most send-buffer allocation that n bytes written in one
// call take (see skbSlack; a test checks it against the running kernel).
func cost(n int) int { return n + n/4 + skbSlack }

// fits is the most bytes of output, framed as data frames, whose cost
// fits in free bytes of send buffer (0 when none do).
func fits(free int) int {
	framed := (free - skbSlack) * 4 / 5 // cost(framed) ≤ free
	n := framed - (framed/FrameMax+1)*frameSlack
	return max(n, 0)
}

// Writer writes an attach stream's frames to one connection without ever
// blocking in write(2) when the connection is a Unix socket on Linux: it
// measures the socket's queue before each write and writes only what fits
// (see skbSlack), so no frame is ever cut short by a stalled reader, and
// a stream can always end with a whole frame. Data and Frame are for one
// goroutine; Interrupt may be called from any.
type Writer struct {
	c           net.Conn
	raw         syscall.RawConn // nil: the queue cannot be measured; writes may block (blockTimeout)
	sndbuf      int             // the socket's send buffer (SO_SNDBUF), bytes
	step        int             // the most output waited for before a write (≤ chunk)
	dw          DataWriter
	fbuf        []byte
	interrupted atomic.Bool
}

// NewWriter asks for c's send buffer (sendBuffer) and returns a Writer
// for it.
func NewWriter(c net.Conn) *Writer {
	w := &Writer{c: c}
	if s, ok := c.(interface{ SetWriteBuffer(int) error }); ok {
		_ = s.SetWriteBuffer(sendBuffer)
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return w
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return w
	}
	if n, ok := sendBufferSize(raw); ok {
		// What a quarter-full buffer (the writable mark) leaves for output.
		if step := min(chunk, fits(n*3/4-reserve)); step > 0 {
			w.raw, w.sndbuf, w.step = raw, n, step
		}
	}
	return w
}

// Interrupt makes a Data call under way return ErrInterrupted as soon as
// it would wait, and every later Data call at once. Frame still works: a
// sender whose queue was aborted is woken to send the abort frame.
func (w *Writer) Interrupt() {
	w.interrupted.Store(true)
	w.c.SetWriteDeadline(time.Unix(1, 0))
}

// Data writes b as data frames of at most FrameMax bytes, each write as
// much as the socket takes without blocking while keeping room for the
// end frames, waiting for room in between. ErrInterrupted after
// Interrupt (what was written so far is whole frames); else the
// connection's errors.
func (w *Writer) Data(b []byte) error {
	if w.interrupted.Load() {
		return ErrInterrupted
	}
	if w.raw == nil {
		w.c.SetWriteDeadline(time.Now().Add(blockTimeout))
		return w.dw.Write(w.c, b)
	}
	for len(b) > 0 {
		n, err := w.room(min(len(b), w.step), reserve, true)
		if err != nil {
			return err
		}
		n = min(n, len(b))
		if err := w.dw.Write(w.c, b[:n]); err != nil {
			if w.interrupted.Load() {
				// Interrupt's deadline came before the write began
				// (internal/poll checks it first): nothing was written.
				return ErrInterrupted
			}
			return err
		}
		b = b[n:]
	}
	return nil
}

// Frame writes f, a frame that ends the stream (exit, error; at most
// ctrlMax bytes), into the room kept for it. It works after Interrupt.
func (w *Writer) Frame(f *wire.StreamFrame) error {
	payload, err := wire.Marshal(f)
	if err != nil {
		return err
	}
	w.fbuf = wire.AppendFrame(w.fbuf[:0], payload)
	w.c.SetWriteDeadline(time.Now().Add(ctrlWait))
	if w.raw != nil && len(w.fbuf) <= ctrlMax {
		// fits counts output of data frames; a frame needs its own
		// length of it.
		if _, err := w.room(len(w.fbuf), 0, false); err != nil {
			return err
		}
	}
	_, err = w.c.Write(w.fbuf)
	return err
}

// room waits until want bytes of output fit in the socket's send buffer
// with keep bytes kept free, and returns how many fit. With interruptible
// it returns ErrInterrupted once Interrupt was called.
func (w *Writer) room(want, keep int, interruptible bool) (int, error) {
	var n int
	var qerr error
	err := w.raw.Write(func(fd uintptr) bool {
		if interruptible && w.interrupted.Load() {
			return true
		}
		queued, err := sendQueued(fd)
		if err != nil {
			qerr = err
			return true
		}
		n = fits(w.sndbuf - queued - keep)
		return n >= want
	})
	switch {
	case interruptible && w.interrupted.Load():
		return 0, ErrInterrupted
	case err != nil:
		return 0, err
	}
	return n, qerr
}
