package server

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// frameBody is the request body of an egress.request_upload as its caller
// sends it after the request: data frames of 1 to StreamDataMax bytes,
// then eof. One goroutine (run) reads the caller's frames for the whole
// exchange: while the body is under way it hands each data frame to the
// body's reader (Body) through a pipe, each frame awaited at most idle;
// after eof it watches for the caller leaving, as watchClient does for
// egress.request_stream. Create with newFrameBody; stop ends run.
type frameBody struct {
	src   frameSource
	idle  time.Duration
	cause context.CancelCauseFunc // ends the exchange
	pr    *io.PipeReader
	pw    *io.PipeWriter
	done  chan struct{}

	mu       sync.Mutex
	stopping bool
	serving  context.Context // the stream's (setServing): its end is egressd stopping
}

// setServing tells the reader the stream's context: a read that fails
// once it has ended is egressd stopping, not the caller leaving.
func (fb *frameBody) setServing(ctx context.Context) {
	fb.mu.Lock()
	fb.serving = ctx
	fb.mu.Unlock()
}

// serverStopping reports whether egressd is stopping the stream.
func (fb *frameBody) serverStopping() bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.serving != nil && fb.serving.Err() != nil
}

// frameSource is where a frameBody's frames come from: the upload's
// *rpc.Stream.
type frameSource interface {
	Recv() (*wire.StreamFrame, error)
	Conn() net.Conn
}

func newFrameBody(src frameSource, idle time.Duration, cause context.CancelCauseFunc) *frameBody {
	pr, pw := io.Pipe()
	return &frameBody{src: src, idle: idle, cause: cause, pr: pr, pw: pw, done: make(chan struct{})}
}

// Body returns the body as the pipeline reads it: the data frames' bytes
// in order, then io.EOF at eof. Its errors are typed: egress.timeout (no
// frame for idle while the body was under way), egress.client_closed (the
// caller left: detach, or its connection closed), request.invalid (a
// frame this op does not take there), or a frame's decode error
// (frame.malformed, frame.too_large, frame.truncated,
// request.unknown_field).
func (fb *frameBody) Body() io.Reader { return fb.pr }

// Errors of an upload's frames, for Body's reader and the exchange.
func errBadFrame(format string, args ...any) error {
	return wire.Errorf(wire.CodeRequestInvalid, format, args...)
}

func errBodyIdle(err error) error {
	return wire.Wrap(egressdapi.CodeTimeout, "the request body did not arrive in time", err)
}

func errBodyGone() error {
	return wire.Errorf(egressdapi.CodeClientClosed, "the client went away before its request body ended")
}

// run reads frames until the caller leaves, sends a frame that is not
// allowed where it comes, or stop is called.
func (fb *frameBody) run() {
	defer close(fb.done)
	ended := false // eof arrived
	for {
		if !fb.arm(ended) {
			return
		}
		f, err := fb.src.Recv()
		if err != nil {
			if fb.stopped() {
				return
			}
			fb.failed(err, ended)
			return
		}
		left, err := fb.take(f, &ended)
		if err != nil {
			fb.pw.CloseWithError(err)
			fb.cause(errors.Join(pipeline.ErrClientGone, err)) // its code goes back
			return
		}
		if left {
			return
		}
	}
}

// take handles one frame and reports whether the caller left (detach),
// or returns the error that ends the exchange. Data that the pipeline no
// longer reads (the exchange gave up its body) is dropped.
func (fb *frameBody) take(f *wire.StreamFrame, ended *bool) (left bool, err error) {
	switch f.T {
	case wire.StreamData:
		switch {
		case *ended:
			return false, errBadFrame("a data frame after the request body's eof")
		case len(f.B) == 0 || len(f.B) > egressdapi.StreamDataMax:
			return false, errBadFrame("a data frame of a request body carries 1 to %d bytes", egressdapi.StreamDataMax)
		}
		_, _ = fb.pw.Write(f.B) // fails only once the body is no longer read
		return false, nil
	case wire.StreamEOF:
		if *ended {
			return false, errBadFrame("a second eof")
		}
		*ended = true
		fb.pw.Close()
		return false, nil
	case wire.StreamDetach:
		fb.pw.CloseWithError(errBodyGone())
		fb.cause(pipeline.ErrClientGone)
		return true, nil
	}
	return false, errBadFrame("a %s frame: the client of an upload sends data, eof and detach", f.T)
}

// failed ends the body and the exchange after a failed read.
func (fb *frameBody) failed(err error, ended bool) {
	var ne net.Error
	switch {
	case fb.serverStopping():
		fb.pw.CloseWithError(errBodyGone())
		fb.cause(errStopping)
	case !ended && errors.As(err, &ne) && ne.Timeout():
		// The body stopped arriving: the pipeline fails the exchange with
		// the timeout (408-like), as the proxy face does.
		fb.pw.CloseWithError(errBodyIdle(err))
	case wire.CodeOf(err) != wire.CodeInternal && !errors.Is(err, io.EOF):
		fb.pw.CloseWithError(err) // a malformed frame: its code goes back
		fb.cause(errors.Join(pipeline.ErrClientGone, err))
	default: // closed, reset
		fb.pw.CloseWithError(errBodyGone())
		fb.cause(pipeline.ErrClientGone)
	}
}

// arm sets the read deadline for the next frame (idle while the body is
// under way, none after its eof: the caller then waits for the answer)
// and reports false once stop was called.
func (fb *frameBody) arm(ended bool) bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if fb.stopping {
		return false
	}
	var at time.Time
	if !ended && fb.idle > 0 {
		at = time.Now().Add(fb.idle)
	}
	fb.src.Conn().SetReadDeadline(at)
	return true
}

func (fb *frameBody) stopped() bool {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return fb.stopping
}

// stop ends run and waits for it: a read under way is woken, and a data
// frame waiting for the pipeline is dropped. The caller's connection is
// left as it is. Safe to call more than once.
func (fb *frameBody) stop() {
	fb.mu.Lock()
	if !fb.stopping {
		fb.stopping = true
		fb.src.Conn().SetReadDeadline(time.Unix(1, 0))
	}
	fb.mu.Unlock()
	fb.pw.CloseWithError(errBodyGone())
	<-fb.done
}
