package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// aLongTimeAgo is a deadline that has passed: setting it wakes a blocked
// read at once.
var aLongTimeAgo = time.Unix(1, 0)

// watchClient reads ahead on c while an answer is awaited and streamed,
// as net/http's server does: when the client closes or resets its
// connection, cancel is called with pipeline.ErrClientGone, which ends
// the upstream request at once (a generation nobody waits for does not
// run on). A pipelined next request is left unread: in c.br when it was
// buffered already, else as the one byte the watch read (c.ahead). In
// that case, the usual one (a client waits for its answer), c.br goes
// back to the pool while the watch runs: a stream that waits for its
// next event holds no reader. stop ends the watch, gives c a reader
// again and leaves c's read deadline unset for the next readBy.
func (c *conn) watchClient(cancel context.CancelCauseFunc) (stop func()) {
	c.rdl = time.Time{}
	_ = c.c.SetReadDeadline(time.Time{})
	done := make(chan struct{})
	var stopping atomic.Bool
	if c.br.Buffered() > 0 {
		// Bytes of a next request arrived already: the client is there.
		// (Peek returns at once; nothing is watched, as before.)
		close(done)
	} else {
		c.s.bufs.putReader(c.br)
		c.br = nil
		a := &c.ahead
		go func() {
			defer close(done)
			n, err := a.c.Read(a.b[:])
			a.has = n > 0
			if n == 0 && err != nil && !stopping.Load() {
				cancel(pipeline.ErrClientGone)
			}
		}()
	}
	return func() {
		stopping.Store(true)
		_ = c.c.SetReadDeadline(aLongTimeAgo)
		<-done
		c.rdl = aLongTimeAgo // the next readBy sets a real one
		if c.br == nil {
			c.br = c.s.bufs.reader(&c.ahead)
		}
	}
}

// stream writes a streamed answer to the client as it arrives: the head
// at once, then each piece of the scrubbed body as the pipeline releases
// it, chunked for an HTTP/1.1 client (the body's length changes when a
// value is scrubbed out, so Content-Length is never passed on) and
// delimited by the connection's close for HTTP/1.0; trailers follow the
// last chunk. An answer cut off by the pipeline (egress.response_aborted,
// a timeout, the upstream breaking) ends without the last chunk and the
// connection closes, so the client sees an incomplete body, never a
// clean end. It reports whether the connection may carry another
// request.
func (c *conn) stream(req *http.Request, st *pipeline.Stream) bool {
	defer st.Close()
	idle := c.s.cfg.ExchangeIdle
	hasBody := req.Method != http.MethodHead && pipeline.BodyAllowed(st.Status)
	chunked := hasBody && req.ProtoAtLeast(1, 1)
	closeAfter := req.Close || (hasBody && !chunked)
	// No buffer of its own: each piece is the pipeline's (Stream.Next),
	// written through a pooled writer given back after each flush, so a
	// stream waiting for its next event holds only what the pipeline
	// keeps for it.
	var (
		piece []byte
		err   error
	)
	if hasBody {
		// The head waits for the first piece of the body: an answer the
		// pipeline cuts off before any of it was released is refused
		// whole, with its code, instead of ending early.
		if piece, err = st.Next(); len(piece) == 0 && err != nil && err != io.EOF {
			if wire.CodeOf(err) == egressdapi.CodeClientClosed {
				return false
			}
			c.refuse(err, req.Close)
			return !req.Close
		}
	}
	c.writeBy(idle)
	writeStreamHead(c.w(), st.Status, st.Header, closeAfter, chunked)
	if !hasBody {
		if ferr := c.flush(); ferr != nil {
			st.Fail(clientGone(ferr))
			return false
		}
		_, _ = io.Copy(io.Discard, st) // nothing: ends the exchange as complete
		return !closeAfter
	}
	for {
		bw := c.w()
		// A piece larger than the writer goes out in several writes
		// (the writer's fill, the rest, the chunk's end): inside a
		// tunnel each would be a TLS record sent on its own, so the
		// socket holds them and sends them at once.
		held := c.raw != nil && len(piece) >= bw.Available()
		if held {
			c.raw.hold()
		}
		if len(piece) > 0 {
			c.writeBy(idle)
			if chunked {
				bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(piece)), 16))
				bw.WriteString("\r\n")
				bw.Write(piece)
				bw.WriteString("\r\n")
			} else {
				bw.Write(piece)
			}
		}
		if err == io.EOF {
			if chunked {
				bw.WriteString("0\r\n")
				writeFields(bw, st.Trailer())
				bw.WriteString("\r\n")
			}
		}
		ferr := c.flush()
		if held {
			if rerr := c.raw.release(); ferr == nil {
				ferr = rerr
			}
		}
		if ferr != nil {
			st.Fail(clientGone(ferr))
			return false
		}
		if err == io.EOF {
			return !closeAfter
		}
		if err != nil {
			// Cut off: the last chunk is never sent and the connection
			// closes (the pipeline audited why).
			return false
		}
		piece, err = st.Next()
	}
}

// clientGone types a failed write to the client.
func clientGone(err error) error {
	return wire.Wrap(egressdapi.CodeClientClosed, "the client connection failed", err)
}

// writeStreamHead writes the status line and header of a streamed answer:
// "Connection: close" first when closing, the fields (sorted by name, as
// pipeline.SanitizeFields returns them), and "Transfer-Encoding: chunked"
// when chunked. An answer without a body (to HEAD, 1xx, 204, 304) carries
// no length: RFC 9110 section 8.6 allows one for HEAD only when it equals
// what GET would send, which egressd cannot promise after scrubbing.
func writeStreamHead(w *bufio.Writer, status int, header []request.Field, closeAfter, chunked bool) {
	writeStatusLine(w, status)
	if closeAfter {
		w.WriteString("Connection: close\r\n")
	}
	writeFields(w, header)
	if chunked {
		w.WriteString("Transfer-Encoding: chunked\r\n")
	}
	w.WriteString("\r\n")
}
