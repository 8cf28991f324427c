package manager

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"time"

	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/holder"
)

// openHolderAttach opens holder.attach on the holder socket at path and
// returns the connection, positioned at the first stream frame. It speaks
// the request/response exchange itself (as rpc.Client.OpenStream does)
// and reads the answer with wire.ReadFrame, which reads no byte past it:
// the relay then reads the holder's frames straight from the connection
// into one reused buffer (frameReader), where rpc.Stream would allocate
// and decode each one. Errors are the holder's (*wire.Error), or
// daemon.unavailable when the socket cannot be dialled.
func openHolderAttach(ctx context.Context, path string, req *holder.AttachRequest, timeout time.Duration) (*net.UnixConn, error) {
	body, err := wire.Marshal(req)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	id := make([]byte, wire.IDLen)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	conn, err := sock.Dial(ctx, path)
	if err != nil {
		return nil, &wire.Error{Code: wire.CodeUnavailable, Msg: "holder socket is not reachable", Retry: wire.RetrySafe, Err: err}
	}
	conn.SetDeadline(deadline)
	r := &wire.Request{ID: id, Op: holder.OpAttach, Deadline: deadline.UnixMilli(), Corr: rpc.CorrFrom(ctx), Body: body}
	if err := wire.WriteFrame(conn, wire.AppendRequest(nil, r), 0); err != nil {
		conn.Close()
		return nil, &wire.Error{Code: wire.CodeConnectionClosed, Msg: "could not send the attach request", Retry: wire.RetrySafe, Err: err}
	}
	p, err := wire.ReadFrame(conn, 0)
	if err != nil {
		conn.Close()
		return nil, &wire.Error{Code: wire.CodeConnectionClosed, Msg: "the holder did not answer the attach request", Retry: wire.RetryAfterObserve, Err: err}
	}
	ans, err := wire.DecodeResponse(p, wire.Limits{})
	switch {
	case err != nil:
		conn.Close()
		return nil, wire.Wrap(wire.CodeResponseMalformed, "bad answer to holder.attach", err)
	case !bytes.Equal(ans.ID, id):
		conn.Close()
		return nil, wire.Errorf(wire.CodeResponseMismatch, "answer to another request")
	case !ans.OK:
		conn.Close()
		if ans.Err == nil {
			return nil, wire.Errorf(wire.CodeResponseMalformed, "failed answer without an error")
		}
		return nil, ans.Err.ToError()
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// frameReader reads whole frames from a connection into one buffer that
// grows to the largest frame seen; several frames that arrive together
// take one read.
type frameReader struct {
	c    net.Conn
	buf  []byte
	r, w int // unread bytes are buf[r:w]
}

// next returns the next frame, length included, valid until the next call.
// Errors: io.EOF at a clean end; frame.empty, frame.too_large (checked
// before any allocation), frame.truncated; the connection's own.
func (fr *frameReader) next() ([]byte, error) {
	if fr.r == fr.w {
		fr.r, fr.w = 0, 0
	}
	for {
		if avail := fr.w - fr.r; avail >= 4 {
			n := binary.BigEndian.Uint32(fr.buf[fr.r:])
			if err := wire.CheckLength(n, 0); err != nil {
				return nil, err
			}
			if size := 4 + int(n); avail >= size {
				f := fr.buf[fr.r : fr.r+size]
				fr.r += size
				return f, nil
			} else if size > len(fr.buf)-fr.r {
				fr.makeRoom(size)
			}
		} else if len(fr.buf)-fr.r < 4 {
			fr.makeRoom(64 << 10)
		}
		m, err := fr.c.Read(fr.buf[fr.w:])
		fr.w += m
		if err != nil && m == 0 {
			if err == io.EOF && fr.w > fr.r {
				return nil, &wire.Error{Code: wire.CodeFrameTruncated, Msg: "frame truncated", Retry: wire.RetrySafe, Err: io.ErrUnexpectedEOF}
			}
			return nil, err
		}
	}
}

// makeRoom moves the unread bytes to the front of a buffer of at least
// size bytes (a frame's size is at most wire.DefaultMaxFrame + 4).
func (fr *frameReader) makeRoom(size int) {
	if size < 64<<10 {
		size = 64 << 10
	}
	buf := fr.buf
	if len(buf) < size {
		buf = make([]byte, max(size, 2*len(buf)))
	}
	fr.w = copy(buf, fr.buf[fr.r:fr.w])
	fr.r, fr.buf = 0, buf
}
