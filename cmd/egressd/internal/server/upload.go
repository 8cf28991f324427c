package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"

	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// requestUpload serves egress.request_upload: egress.request_stream whose
// request body the caller sends in data frames after the request, then
// eof. The body goes upstream as it arrives, through the outbound scan
// (pipeline.Input.BodyStream: a finding fails the upstream request
// before its body is complete), unless the bundle places a credential in
// a body for the request's origin (a JSON-pointer target): that body is
// read whole first, at most MaxBody bytes, holding them in the buffer
// budget. The answer is accepted and streamed as egress.request_stream's
// (streamAnswer), and refusals before it are answers with their codes,
// as there. The rpc deadline bounds the body's upload and the wait for
// the answer's header.
func (s *Server) requestUpload(ctx context.Context, call *rpc.Call, req *egressdapi.RequestRequest) (*egressdapi.RequestStreamResponse, error) {
	if len(req.Body) > 0 {
		return nil, wire.Errorf(wire.CodeRequestInvalid, "egress.request_upload takes its body in data frames after the request, not in it")
	}
	in := input(req, call)
	in.Fields = map[string]any{"via": egressdapi.OpEgressRequestUpload}
	xctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	fb := newFrameBody(call.Upload(), s.idle(), cancel)
	go fb.run()
	x := &exchange{ctx: xctx, cancel: cancel, body: fb, budget: s.Budget}
	late := context.AfterFunc(ctx, func() { cancel(pipeline.ErrClientGone) })
	// The handler's own reads of the body end with the exchange.
	unread := context.AfterFunc(xctx, func() { fb.pw.CloseWithError(errBodyGone()) })
	body, err := s.firstOf(x, &in, req.URL)
	unread()
	if err == nil {
		if body != nil {
			in.Body = body
		}
		x.st, err = s.Pipeline.DoStream(xctx, in)
	}
	if !late() { // ctx ended first: nobody waits for this answer
		x.close()
		if err == nil || wire.CodeOf(err) == egressdapi.CodeClientClosed {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, &wire.Error{Code: wire.CodeRequestDeadline, Msg: "the deadline passed before the upstream answered", Retry: wire.RetryAfterObserve}
			}
			return nil, &wire.Error{Code: wire.CodeServerShuttingDown, Msg: "server stopped before the answer", Retry: wire.RetryAfterObserve}
		}
		return nil, err
	}
	if err != nil {
		var bad *wire.Error
		if cause := context.Cause(xctx); errors.Is(cause, pipeline.ErrClientGone) && errors.As(cause, &bad) {
			err = bad // a frame the op does not take: its code goes back
		}
		x.close()
		return nil, err
	}
	call.Keep(x, func(v any) { v.(*exchange).close() })
	return &egressdapi.RequestStreamResponse{Status: x.st.Status, Headers: headers(x.st.Header)}, nil
}

// firstOf prepares in's body: read whole (returned) when the bundle
// places a credential in a body for rawURL's origin, nil with
// in.BodyStream set to stream it, or nothing at all for a body that is
// empty (eof first). Errors: the body's (frameBody.Body), server.busy
// (the buffer budget is spent; audited here, since the pipeline never
// saw the request).
func (s *Server) firstOf(x *exchange, in *pipeline.Input, rawURL string) ([]byte, error) {
	r := x.body.Body()
	if b, err := s.Registry.Get(in.Invocation); err == nil && s.Pipeline.BodyTarget(b, rawURL) {
		body, err := s.readWhole(x, r)
		if wire.CodeOf(err) == wire.CodeServerBusy {
			s.refused(in, err)
		}
		return body, err
	}
	// The first piece tells an empty body (eof first) from one to
	// stream; the pipeline looks nothing up and dials nothing before it.
	first := make([]byte, 32<<10)
	n, err := io.ReadAtLeast(r, first, 1)
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return nil, nil
	case err != nil:
		return nil, err
	}
	in.BodyStream, in.BodyLength = io.MultiReader(&onePiece{b: first[:n]}, r), -1
	return nil, nil
}

// onePiece is a read-once piece of a body (bytes.Reader without its
// seeking).
type onePiece struct{ b []byte }

func (p *onePiece) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.b)
	p.b = p.b[n:]
	return n, nil
}

// readWhole reads a body whole, at most MaxBody bytes and one more (the
// pipeline refuses a longer one with egress.too_large, audited),
// taking what it holds from the buffer budget as it grows (x gives it
// back when the exchange ends). Errors: server.busy, the body's.
func (s *Server) readWhole(x *exchange, r io.Reader) ([]byte, error) {
	limit := s.maxBody() + 1
	const step = 64 << 10
	var buf []byte
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			grow := min(max(len(buf), step), limit-len(buf))
			if !s.Budget.Take(grow) {
				return nil, wire.Errorf(wire.CodeServerBusy, "egressd holds %d bytes of request bodies already (-buffer-budget); try again", s.Budget.Max())
			}
			x.held += grow
			buf = slices.Grow(buf, grow)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// refused writes the audit record of a request refused before the
// pipeline saw it.
func (s *Server) refused(in *pipeline.Input, err error) {
	fields := map[string]any{"via": egressdapi.OpEgressRequestUpload, pipeline.KeyInvocation: audit.Clip(in.Invocation, 64),
		pipeline.KeyMethod: audit.Clip(in.Method, 16)}
	if _, aerr := s.Audit.Append(context.Background(), audit.Record{Actor: in.Actor, Op: pipeline.OpRequest, Outcome: audit.OutcomeRefused,
		Code: wire.CodeOf(err), Corr: in.Corr, Fields: fields}); aerr != nil {
		s.Logger.Error("audit.append_failed", slog.String("op", pipeline.OpRequest), slog.Any("err", aerr))
	}
}
