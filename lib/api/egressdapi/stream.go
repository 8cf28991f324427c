package egressdapi

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// ResponseStream is a streamed egress answer (Client.RequestStream): the
// status and headers at once, the body through Read as egressd passes it
// on, the trailers once the body has ended. Read must be called from one
// goroutine at a time; Close may be called from any, also during a Read.
type ResponseStream struct {
	// Status is the upstream's status code.
	Status int
	// Headers are the sanitized response headers, sorted by name.
	Headers []Header

	st       *rpc.Stream
	pending  []byte      // data not yet returned by Read
	err      error       // terminal: io.EOF after eof, or the stream's error
	trailers []Header    // from the trailers frame
	trailed  bool        // a trailers frame arrived
	body     *bodySender // egress.request_upload's (nil for egress.request_stream)
	done     atomic.Bool
	closed   atomic.Bool
}

// Read reads the body. It returns io.EOF once the whole body has arrived
// (the eof frame), and otherwise a *wire.Error: the code of the stream's
// error frame when egressd cut the answer off (egress.response_aborted,
// egress.response_too_large, egress.timeout, egress.upstream_error,
// egress.response_undecodable, server.shutting_down; retry
// after_observe, since the request reached the upstream);
// connection.closed when the stream ended without eof or error;
// frame.truncated when it ended inside a frame; response.malformed for a
// frame this op does not send; stream.closed after Close. A body that did
// not end with io.EOF is incomplete, never to be taken for a whole one.
func (r *ResponseStream) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.next()
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// next receives one frame into r.
func (r *ResponseStream) next() {
	f, err := r.st.Recv()
	if err != nil {
		r.end(r.recvError(err))
		return
	}
	switch f.T {
	case wire.StreamData:
		if r.trailed {
			r.end(wire.Errorf(wire.CodeResponseMalformed, "a data frame after the trailers"))
			return
		}
		r.pending = f.B
	case wire.StreamTrailers:
		if r.trailed {
			r.end(wire.Errorf(wire.CodeResponseMalformed, "a second trailers frame"))
			return
		}
		r.trailed = true
		for _, h := range f.H {
			r.trailers = append(r.trailers, Header{Name: h.Name, Value: h.Value})
		}
	case wire.StreamEOF:
		r.end(io.EOF)
	case wire.StreamError:
		r.end(&wire.Error{Code: f.Code, Msg: f.Msg, Retry: wire.RetryAfterObserve})
	default:
		r.end(wire.Errorf(wire.CodeResponseMalformed, "a %s frame in an egress answer", f.T))
	}
}

// end records the terminal error and closes the connection: nothing
// follows an end.
func (r *ResponseStream) end(err error) {
	r.err = err
	r.done.Store(true)
	r.st.Close()
}

// recvError types a failed receive.
func (r *ResponseStream) recvError(err error) error {
	switch {
	case r.body.failed() != nil:
		return r.body.failed() // the request body failed: that ended the stream
	case r.closed.Load():
		return wire.Wrap(wire.CodeStreamClosed, "the stream was closed", err)
	case wire.HasCode(err, wire.CodeFrameTruncated):
		return err
	case errors.Is(err, io.EOF) || wire.CodeOf(err) == wire.CodeInternal:
		// A clean close without eof or error, a reset, a broken
		// connection: the body is incomplete (not wrapping io.EOF: that
		// would read as a clean end).
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return &wire.Error{Code: wire.CodeConnectionClosed, Msg: "the stream ended before the end of the body", Retry: wire.RetryAfterObserve, Err: err}
	}
	return wire.Wrap(wire.CodeResponseMalformed, "a stream frame could not be read", err)
}

// Trailers returns the answer's trailer fields once Read has returned
// io.EOF: nil before, and when the answer had none.
func (r *ResponseStream) Trailers() []Header {
	if r.err != io.EOF {
		return nil
	}
	return r.trailers
}

// Close ends the stream. Before the body has ended it first sends detach
// (waiting at most a second to write it), and egressd ends the upstream
// request; a Read under way returns stream.closed. Safe to call more than
// once, and after the body ended (the connection is closed then).
func (r *ResponseStream) Close() error {
	if r.closed.Swap(true) || r.done.Load() {
		return nil
	}
	r.st.Conn().SetWriteDeadline(time.Now().Add(time.Second))
	_ = r.st.Send(&wire.StreamFrame{T: wire.StreamDetach})
	if err := r.st.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
