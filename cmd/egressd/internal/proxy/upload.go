package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// streamMin is the longest announced body that is still read whole
// first: buffering it costs little, and a request refused for its body
// (a held value, a placeholder, broken framing) is then refused before
// anything is looked up, dialled or sent, as every body was before
// bodies streamed.
const streamMin = 64 << 10

// streams reports whether req's body goes upstream as it arrives
// (pipeline.Input.BodyStream) rather than read whole first: it is
// chunked or announced longer than streamMin, and no credential of b is
// placed in a body for its origin (pipeline.BodyTarget: a JSON-pointer
// target needs the body whole). A WebSocket handshake's body, if any,
// is read whole as before.
func (s *Server) streams(b *bundle.Bundle, req *http.Request, rawURL string) bool {
	return req.Body != nil && req.Body != http.NoBody && (req.ContentLength < 0 || req.ContentLength > streamMin) &&
		!wantsWebSocket(req) && !s.cfg.Pipeline.BodyTarget(b, rawURL)
}

// streamBody is a client's request body as the pipeline reads it while
// it sends it on: progress runs before each read (the connection's read
// deadline: -idle-timeout without a byte), a read error is typed
// (egress.timeout with status 408, or egress.invalid_request: the
// framing broke or the body ended early), and the end is noted (the
// connection can carry another request only once the body was read to
// it) and reported to onEOF.
type streamBody struct {
	r        io.Reader
	progress func()
	first    func() // before the first read (nil: nothing)
	onEOF    func()
	eof      atomic.Bool
	state    atomic.Int32 // bodyFresh, bodyRead or bodyClaimed
}

// The states of a streamBody: nothing read yet; read by the pipeline;
// claimed by the connection (the pipeline refused the request without
// reading any of it), after which the pipeline reads nothing.
const (
	bodyFresh = iota
	bodyRead
	bodyClaimed
)

// claim takes the body back from the pipeline and reports whether it
// had read none of it (the caller may then read the rest itself).
func (b *streamBody) claim() bool { return b.state.CompareAndSwap(bodyFresh, bodyClaimed) }

func (b *streamBody) Read(p []byte) (int, error) {
	if !b.state.CompareAndSwap(bodyFresh, bodyRead) && b.state.Load() == bodyClaimed {
		return 0, wire.Errorf(egressdapi.CodeClientClosed, "the request was answered before its body was sent")
	}
	if b.first != nil {
		b.first()
		b.first = nil
	}
	b.progress()
	n, err := b.r.Read(p)
	switch {
	case err == io.EOF:
		b.eof.Store(true)
		if b.onEOF != nil {
			b.onEOF()
		}
	case err != nil && isTimeout(err):
		err = timedOut(wire.Wrap(egressdapi.CodeTimeout, "the request body did not arrive in time", err))
	case err != nil:
		err = wire.Wrap(egressdapi.CodeInvalidRequest, "malformed request body (chunked framing, or shorter than announced)", err)
	}
	return n, err
}

// done reports whether the body was read to its end.
func (b *streamBody) done() bool { return b.eof.Load() }

// lateWatch is watchClient started when the request body has been read
// (a streamed body is read on the transport's goroutine, which the watch
// must not race for the connection) and stopped once, whichever comes
// first.
type lateWatch struct {
	c      *conn
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	stopFn func()
	ended  bool
}

func (w *lateWatch) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended && w.stopFn == nil {
		w.stopFn = w.c.watchClient(w.cancel)
	}
}

func (w *lateWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	if w.stopFn != nil {
		w.stopFn()
		w.stopFn = nil
	}
}

// interim writes 1xx answers to an HTTP/1.1 client while its request is
// under way: the upstream's (relayed from the transport's goroutine; for
// a body read whole, every 1xx but 100), or egressd's own 100 (Continue)
// when the upstream starts to read a streamed body the client holds back
// for one without having sent it. close ends it before the final answer
// is written.
type interim struct {
	c      *conn
	mu     sync.Mutex
	closed bool
	sent   bool // a 100 went out
}

// relay writes one 1xx answer (RFC 9110 section 15.2) with its
// sanitized fields.
func (w *interim) relay(status int, header []request.Field) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || (status == http.StatusContinue && w.sent) {
		return
	}
	w.sent = w.sent || status == http.StatusContinue
	w.c.writeBy(w.c.s.cfg.ExchangeIdle)
	bw := w.c.w()
	writeStatusLine(bw, status)
	writeFields(bw, header)
	bw.WriteString("\r\n")
	_ = w.c.flush() // a client gone shows on the final answer
}

// proceed writes egressd's own 100 (Continue) when none went yet.
func (w *interim) proceed() { w.relay(http.StatusContinue, nil) }

func (w *interim) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// primeSize is the most of a streamed body read before the request
// starts.
const primeSize = 32 << 10

// prime reads the first piece of a streamed body (one read that returns
// bytes: what has arrived, at most primeSize) before anything is looked
// up or dialled: a body whose framing breaks in it is refused then, as
// a buffered one is (readBody's errors), and one that ends in it (whole
// reports it) is sent as a buffered body. Not for a client that waits
// for 100 (Continue) before it sends its body.
func (c *conn) prime(req *http.Request) (first []byte, whole bool, err error) {
	buf := make([]byte, primeSize)
	for {
		c.readBy(c.s.cfg.ExchangeIdle)
		n, rerr := req.Body.Read(buf)
		switch {
		case rerr == io.EOF:
			return buf[:n], true, nil
		case rerr != nil && isTimeout(rerr):
			return nil, false, timedOut(wire.Wrap(egressdapi.CodeTimeout, "the request body did not arrive in time", rerr))
		case rerr != nil:
			return nil, false, wire.Wrap(egressdapi.CodeInvalidRequest, "malformed request body (chunked framing, or shorter than announced)", rerr)
		case n > 0:
			return buf[:n], false, nil
		}
	}
}

// upload prepares in for a streamed body (streams reported true): the
// body, its length, the 1xx relay for an HTTP/1.1 client, and the watch
// started once the body has been read. It returns the body and the 1xx
// writer to close before the answer.
func (c *conn) upload(in *pipeline.Input, req *http.Request, first []byte, watch *lateWatch) (*streamBody, *interim) {
	var r io.Reader = req.Body
	if len(first) > 0 {
		r = io.MultiReader(bytes.NewReader(first), req.Body)
	}
	body := &streamBody{r: r, progress: func() { c.readBy(c.s.cfg.ExchangeIdle) }, onEOF: watch.start}
	in.BodyStream, in.BodyLength = body, req.ContentLength
	info := &interim{c: c}
	if req.ProtoAtLeast(1, 1) {
		in.Informational = info.relay
		if expectsContinue(req) {
			// The transport reads the body once the upstream sent its 100
			// (relayed), or when it stopped waiting for one: the client
			// then needs egressd's.
			body.first = info.proceed
		}
	}
	return body, info
}
