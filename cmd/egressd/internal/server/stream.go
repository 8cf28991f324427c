package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// DefaultStreamIdle is the longest one frame of a streamed answer may take
// to be written when Server.StreamIdle is zero: -idle-timeout's default.
const DefaultStreamIdle = 5 * time.Minute

// errStopping is the cause with which a stream's exchange is cancelled
// when egressd stops.
var errStopping = errors.New("server: egressd is stopping")

// exchange is an answer egress.request_stream accepted, kept for
// streamAnswer (rpc.Call.Keep).
type exchange struct {
	st     *pipeline.Stream // nil until the answer was accepted
	ctx    context.Context  // DoStream's: its cause says who ended it
	cancel context.CancelCauseFunc
	once   sync.Once
	// body is egress.request_upload's request body, whose reader also
	// watches the client once the body ended (nil for
	// egress.request_stream: watchClient does).
	body   *frameBody
	budget *pipeline.Budget // holds held bytes of a body read whole
	held   int
}

// close ends the exchange (its after record and decision line are
// written, the body's reader stops, the buffer budget is given back),
// once.
func (x *exchange) close() {
	x.once.Do(func() {
		if x.st != nil {
			x.st.Close()
		}
		x.cancel(nil)
		if x.body != nil {
			x.body.stop()
		}
		if x.held > 0 {
			x.budget.Give(x.held)
		}
	})
}

// requestStream accepts egress.request_stream: the request runs through the
// pipeline as egress.request's does (the same refusals, with the same codes),
// and the answer is accepted as soon as its header has arrived. The exchange
// outlives this handler, so it runs under a context of its own: the rpc
// deadline bounds only the wait for the header (docs/protocol.md, "Request
// envelope"). A deadline that passes first means the caller stopped waiting:
// the upstream request ends as egress.client_closed and the answer is
// request.deadline_exceeded.
func (s *Server) requestStream(ctx context.Context, call *rpc.Call, req *egressdapi.RequestRequest) (*egressdapi.RequestStreamResponse, error) {
	in := input(req, call)
	in.Fields = map[string]any{"via": egressdapi.OpEgressRequestStream}
	xctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	late := context.AfterFunc(ctx, func() { cancel(pipeline.ErrClientGone) })
	st, err := s.Pipeline.DoStream(xctx, in)
	if !late() { // ctx ended first: nobody waits for this answer
		if err == nil {
			st.Close()
		}
		cancel(nil)
		if err == nil || wire.CodeOf(err) == egressdapi.CodeClientClosed {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, &wire.Error{Code: wire.CodeRequestDeadline, Msg: "the deadline passed before the upstream answered", Retry: wire.RetryAfterObserve}
			}
			return nil, &wire.Error{Code: wire.CodeServerShuttingDown, Msg: "server stopped before the answer", Retry: wire.RetryAfterObserve}
		}
		return nil, err
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	x := &exchange{st: st, ctx: xctx, cancel: cancel}
	call.Keep(x, func(v any) { v.(*exchange).close() })
	return &egressdapi.RequestStreamResponse{Status: st.Status, Headers: headers(st.Header)}, nil
}

// streamAnswer sends the body of the answer requestStream accepted: data
// frames of at most egressdapi.StreamDataMax bytes as the pipeline
// releases them, then a trailers frame (when the answer has trailer
// fields) and eof; or, when the pipeline cut the answer off, one error
// frame with its code, never eof. A client that closes the stream, sends
// detach or a frame this op does not take, or stops reading for
// StreamIdle ends the upstream request, recorded as egress.client_closed;
// a stopping egressd ends it too and sends server.shutting_down.
func (s *Server) streamAnswer(ctx context.Context, call *rpc.Call, st *rpc.Stream) error {
	x, _ := call.Kept().(*exchange)
	if x == nil {
		return wire.Errorf(wire.CodeInternal, "no exchange was kept for the stream")
	}
	defer x.close()
	if x.body != nil {
		x.body.setServing(ctx)
	} else { // an upload's body reader watches the client itself
		var stopping atomic.Bool
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			watchClient(ctx, x, st, &stopping)
		}()
		defer func() {
			stopping.Store(true)
			st.Conn().SetReadDeadline(time.Unix(1, 0)) // wakes the watch
			<-watched
		}()
	}
	stop := context.AfterFunc(ctx, func() { x.cancel(errStopping) })
	defer stop()
	if err := s.pump(x, st); err != nil {
		s.Logger.Info("egress.stream_end", slog.String("code", wire.CodeOf(err)), slog.String("corr", call.Corr))
		s.send(st, &wire.StreamFrame{T: wire.StreamError, Code: wire.CodeOf(err), Msg: wire.AsError(err).Msg})
	}
	return nil
}

// pump copies the body to the client until it ends. It returns nil once
// eof was sent or the client is gone (there is nobody to tell), and
// otherwise the error the stream ends with.
func (s *Server) pump(x *exchange, st *rpc.Stream) error {
	buf := make([]byte, egressdapi.StreamDataMax)
	for {
		n, err := x.st.Read(buf)
		if n > 0 {
			if serr := s.send(st, &wire.StreamFrame{T: wire.StreamData, B: buf[:n]}); serr != nil {
				x.st.Fail(wire.Wrap(egressdapi.CodeClientClosed, "the client could not be written to", serr))
				return nil
			}
		}
		switch {
		case err == nil:
			continue
		case err == io.EOF:
			if tr := x.st.Trailer(); len(tr) > 0 {
				f := &wire.StreamFrame{T: wire.StreamTrailers}
				for _, h := range tr {
					f.H = append(f.H, wire.HeaderField{Name: h.Name, Value: h.Value})
				}
				if s.send(st, f) != nil {
					return nil
				}
			}
			_ = s.send(st, &wire.StreamFrame{T: wire.StreamEOF})
			return nil
		}
		cause := context.Cause(x.ctx)
		var bad *wire.Error
		switch {
		case errors.Is(cause, errStopping):
			return &wire.Error{Code: wire.CodeServerShuttingDown, Msg: "server stopped the stream", Retry: wire.RetryAfterObserve}
		case errors.Is(cause, pipeline.ErrClientGone) && errors.As(cause, &bad):
			return bad // a frame the op does not take
		case errors.Is(cause, pipeline.ErrClientGone):
			return nil
		}
		return err
	}
}

// send writes f, taking at most StreamIdle.
func (s *Server) send(st *rpc.Stream, f *wire.StreamFrame) error {
	st.Conn().SetWriteDeadline(time.Now().Add(s.idle()))
	return st.Send(f)
}

// watchClient reads what the client sends while its answer streams: eof
// (it has nothing more to send) is taken and ignored; detach, a closed or
// broken connection, and any other frame (a bad frame as
// request.invalid, or its decode error) end the exchange with
// pipeline.ErrClientGone. It returns when stopping is set and its read
// woken, or at that end; when egressd stops (ctx) it ends the exchange
// with errStopping.
func watchClient(ctx context.Context, x *exchange, st *rpc.Stream, stopping *atomic.Bool) {
	for {
		f, err := st.Recv()
		switch {
		case err != nil && stopping.Load():
			return
		case err != nil && ctx.Err() != nil:
			x.cancel(errStopping)
			return
		case err != nil && wire.CodeOf(err) != wire.CodeInternal && !errors.Is(err, io.EOF):
			x.cancel(errors.Join(pipeline.ErrClientGone, err)) // a malformed frame: its code goes back
			return
		case err != nil:
			x.cancel(pipeline.ErrClientGone)
			return
		case f.T == wire.StreamEOF:
			continue
		case f.T == wire.StreamDetach:
			x.cancel(pipeline.ErrClientGone)
			return
		default:
			x.cancel(errors.Join(pipeline.ErrClientGone, wire.Errorf(wire.CodeRequestInvalid, "a %s frame: the client of a streamed answer sends only detach or eof", f.T)))
			return
		}
	}
}
