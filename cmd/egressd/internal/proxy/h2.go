package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// serveH2 serves the inside of an intercepted tunnel whose client chose
// HTTP/2 in ALPN (RFC 9113): every stream is a request of its own, with
// its own decision through the same pipeline as an HTTP/1.1 request in
// the tunnel, bound to the CONNECT authority. golang.org/x/net/http2
// (already required for IDNA) does the framing and flow control.
func (c *conn) serveH2() {
	srv := &http2.Server{
		MaxConcurrentStreams: uint32(c.s.cfg.MaxRequestsPerInvocation),
		IdleTimeout:          c.s.cfg.IdleTimeout,
		MaxReadFrameSize:     1 << 20,
		WriteByteTimeout:     c.s.cfg.ExchangeIdle, // a client that reads nothing at all
	}
	srv.ServeConn(c.c, &http2.ServeConnOpts{Context: c.s.ctx, Handler: http.HandlerFunc(c.serveStream),
		BaseConfig: &http.Server{MaxHeaderBytes: c.s.cfg.MaxHeaderBytes}})
}

// serveStream answers one HTTP/2 stream inside the tunnel.
func (c *conn) serveStream(w http.ResponseWriter, req *http.Request) {
	t := c.tunnel
	fields := map[string]any{"via": c.via, "tunnel": t.authority(), "proto": "h2"}
	refuse := func(err error) {
		c.recordRefusal(t.b, err, pipeline.OpRequest, map[string]any{pipeline.KeyMethod: req.Method, "proto": "h2"})
		writeRefusal(w, c.s.cfg.Registry.Scrubber().Scrub(wire.AsError(err).Msg), err)
	}
	// The :authority must name the tunnel's authority and hold no held
	// value; the :path is origin-form (net/http2 refuses anything else).
	if req.Host != t.auth {
		if err := c.s.cfg.Pipeline.ScanHostName(req.Host); err != nil {
			refuse(err)
			return
		}
		if !c.sameAuthority(req.Host, t) {
			refuse(errOtherHost())
			return
		}
	}
	if !strings.HasPrefix(req.RequestURI, "/") {
		refuse(misdirected(wire.Errorf(egressdapi.CodeInvalidRequest, "the request target names another authority than the tunnel's")))
		return
	}
	b := t.b
	if !c.s.invRequests.take(b.Invocation) {
		refuse(wire.Errorf(wire.CodeServerBusy, "too many requests in flight for this invocation (at most %d)", c.s.cfg.MaxRequestsPerInvocation))
		return
	}
	slot := true
	giveSlot := func() {
		if slot {
			slot = false
			c.s.invRequests.give(b.Invocation)
		}
	}
	defer giveSlot()
	// The body keeps arriving or the stream ends: -idle-timeout between
	// reads, as for HTTP/1.1 (the h2 server's idle timeout does not run
	// while a stream is open).
	rc := http.NewResponseController(w)
	progress := func() { _ = rc.SetReadDeadline(time.Now().Add(c.s.cfg.ExchangeIdle)) }
	in := pipeline.Input{Invocation: b.Invocation, Method: req.Method, URL: t.base + req.RequestURI, Actor: c.actor,
		Bundle: b, Substitute: true, Fields: fields}
	if c.s.streams(b, req, in.URL) {
		// net/http2 sends 100 (Continue) on the body's first read, which
		// the transport makes once the upstream sent its own (or stopped
		// waiting for it).
		in.BodyStream, in.BodyLength = &streamBody{r: req.Body, progress: progress}, req.ContentLength
	} else {
		body, held, err := c.s.readBody(req, progress, nil) // net/http2 sends 100 (Continue) on the first read
		defer c.s.budget.Give(held)
		if err != nil {
			refuse(err)
			return
		}
		in.Body = body
	}
	for name, vs := range req.Header {
		if name == "Content-Length" || name == "Transfer-Encoding" {
			continue
		}
		for _, v := range vs {
			in.Header = append(in.Header, request.Field{Name: name, Value: v})
		}
	}
	ctx, cancel := context.WithCancelCause(c.s.ctx)
	defer cancel(nil)
	// A reset stream or a closed connection ends the stream's context.
	stop := context.AfterFunc(req.Context(), func() { cancel(pipeline.ErrClientGone) })
	defer stop()
	info := &h2Interim{w: w}
	in.Informational = info.relay
	st, err := c.s.cfg.Pipeline.DoStream(ctx, in)
	info.close()
	giveSlot()
	if err != nil {
		if wire.CodeOf(err) != egressdapi.CodeClientClosed {
			writeRefusal(w, c.s.cfg.Registry.Scrubber().Scrub(wire.AsError(err).Msg), err) // the pipeline audited it
		}
		return
	}
	if !c.s.takeStream(st, b.Invocation) {
		writeRefusal(w, "", errStreams(c.s.cfg.MaxStreamsPerInvocation))
		return
	}
	defer c.s.invStreams.give(b.Invocation)
	defer st.Close()
	streamH2(w, req, st, c.s.cfg.ExchangeIdle)
}

// h2Interim relays the upstream's 1xx answers but 100 (a 103 Early
// Hints) to an HTTP/2 stream as HEADERS frames of their own (RFC 9113
// section 8.1), with their sanitized fields. net/http2 sends the
// stream's 100 (Continue) itself when the body is first read. close ends
// it before the final answer is written.
type h2Interim struct {
	w      http.ResponseWriter
	mu     sync.Mutex
	closed bool
}

// relay writes one 1xx answer: the fields go in the handler's header map
// for the write and out of it after (net/http2 keeps the map for the
// final answer).
func (i *h2Interim) relay(status int, header []request.Field) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed || status == http.StatusContinue {
		return
	}
	h := i.w.Header()
	for _, f := range header {
		h[f.Name] = append(h[f.Name], f.Value)
	}
	i.w.WriteHeader(status)
	for _, f := range header {
		delete(h, f.Name)
	}
}

func (i *h2Interim) close() {
	i.mu.Lock()
	i.closed = true
	i.mu.Unlock()
}

// streamH2 writes a streamed answer to an HTTP/2 stream: the head with
// the first released piece of the body (an answer cut off before any is
// refused whole), each piece flushed as it is released, trailers after
// the body; an answer cut off later resets the stream (RST_STREAM,
// never END_STREAM: http.ErrAbortHandler), so the client sees an
// incomplete body. Each piece must be written within idle: a client that
// grants the stream no flow-control window resets it then, as a client
// that stops reading ends an HTTP/1.1 answer.
func streamH2(w http.ResponseWriter, req *http.Request, st *pipeline.Stream, idle time.Duration) {
	var (
		piece []byte // the pipeline's (Stream.Next): no buffer of its own
		err   error
	)
	hasBody := req.Method != http.MethodHead && pipeline.BodyAllowed(st.Status)
	if hasBody {
		if piece, err = st.Next(); len(piece) == 0 && err != nil && err != io.EOF {
			writeRefusal(w, "", err)
			return
		}
	}
	h := w.Header()
	for _, f := range st.Header {
		h[f.Name] = append(h[f.Name], f.Value)
	}
	w.WriteHeader(st.Status)
	rc := http.NewResponseController(w)
	if !hasBody {
		_ = rc.Flush()
		return
	}
	for {
		if len(piece) > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(idle))
			if _, werr := w.Write(piece); werr != nil {
				st.Fail(clientGone(werr))
				return
			}
			if ferr := rc.Flush(); ferr != nil {
				st.Fail(clientGone(ferr))
				return
			}
		}
		if err == io.EOF {
			for _, f := range st.Trailer() {
				h[http.TrailerPrefix+f.Name] = append(h[http.TrailerPrefix+f.Name], f.Value)
			}
			return
		}
		if err != nil {
			panic(http.ErrAbortHandler) // RST_STREAM: never a clean end
		}
		piece, err = st.Next()
	}
}

// writeRefusal answers a refused HTTP/2 request: the status of err's
// code, the code in X-Hostkit-Error and a short text; msg "" takes the
// error's own (already safe) message.
func writeRefusal(w http.ResponseWriter, msg string, err error) {
	we := wire.AsError(err)
	if msg == "" {
		msg = we.Msg
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set(HeaderError, we.Code)
	status := Status(err)
	if status == http.StatusProxyAuthRequired {
		status = http.StatusForbidden // no proxy authentication inside a tunnel
	}
	w.WriteHeader(status)
	io.WriteString(w, "egressd: "+we.Code+": "+msg+"\n")
}
