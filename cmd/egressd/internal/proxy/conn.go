package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// conn is one client connection: the outer one, or the decrypted inside of
// an intercepted tunnel (tunnel set).
type conn struct {
	s      *Server
	c      net.Conn
	br     *bufio.Reader // pooled (bufs.go); grows for a large head (readHead); nil while unused
	bw     *bufio.Writer // pooled: taken by w, given back by flush
	raw    *bufConn      // an intercepted tunnel's socket under c's TLS layer (nil: c is the socket)
	ahead  ahead         // what br reads: c, after a byte the client watch read
	via    string
	actor  audit.Actor
	tunnel *tunnel
	fields map[string]any // the audit fields of every request on c (read-only once built)

	// The last Proxy-Authorization value that authenticated on c, decoded.
	authHeader, authUser, authTok string

	rdl, wdl time.Time // the read and write deadlines set on c (readBy, writeBy)

	fieldBuf []request.Field // the last request's header fields' storage (handle)

	// host is the last request's Host field as sent ("" without one),
	// kept as a string while the next request sends the same bytes.
	host string
	// transparent is the Hostkit-Transparent mode of the CONNECT being
	// decided ("" for a proxied one): every refusal of it names the mode.
	transparent string
}

// deadlineSlack is how much earlier than asked a deadline may fall, at
// most (and at most a sixteenth of its timeout): a connection's read and
// write deadlines are moved only when the one in force would end sooner
// than that before the new one (or after it), so that back-to-back
// requests, which would each move them by a few milliseconds, mostly set
// none (each set is a runtime timer update).
const deadlineSlack = time.Second

// readBy sets c's read deadline to d from now (within deadlineSlack).
func (c *conn) readBy(d time.Duration) {
	if t := time.Now().Add(d); moveDeadline(c.rdl, t, d) {
		c.rdl = t
		_ = c.c.SetReadDeadline(t)
	}
}

// writeBy sets c's write deadline to d from now (within deadlineSlack).
func (c *conn) writeBy(d time.Duration) {
	if t := time.Now().Add(d); moveDeadline(c.wdl, t, d) {
		c.wdl = t
		_ = c.c.SetWriteDeadline(t)
	}
}

// setDeadline sets both of c's deadlines to t.
func (c *conn) setDeadline(t time.Time) {
	c.rdl, c.wdl = t, t
	_ = c.c.SetDeadline(t)
}

// moveDeadline reports whether a deadline cur must move to t, d from
// now: cur is none, later than t, or before it by more than
// min(deadlineSlack, d/16).
func moveDeadline(cur, t time.Time, d time.Duration) bool {
	return cur.IsZero() || cur.After(t) || t.Sub(cur) > min(deadlineSlack, d/16)
}

// tunnel is what an intercepted connection is bound to: its CONNECT
// authority and the authenticated bundle.
type tunnel struct {
	b      *bundle.Bundle
	host   string // canonical
	port   uint16
	scheme string // of every request inside: https, or http for a transparent plain-HTTP connection
	auth   string // host[:port], the port left out when the scheme's default (authority)
	base   string // scheme + "://" + auth, the prefix of every origin-form target
	// transparent is the Hostkit-Transparent value of a bridge's
	// connection ("" for a proxied CONNECT).
	transparent string
}

func newTunnel(b *bundle.Bundle, host string, port uint16) *tunnel {
	return newSchemeTunnel(b, netguard.SchemeHTTPS, host, port)
}

func newSchemeTunnel(b *bundle.Bundle, scheme, host string, port uint16) *tunnel {
	t := &tunnel{b: b, host: host, port: port, scheme: scheme}
	if port == netguard.DefaultPort(scheme) {
		port = 0
	}
	t.auth = netguard.JoinHostPort(host, port)
	t.base = scheme + "://" + t.auth
	return t
}

// authority returns the tunnel's authority as audit records and targets
// name it: host[:port], without the default https port.
func (t *tunnel) authority() string { return t.auth }

func newConn(s *Server, c net.Conn, via string, actor audit.Actor) *conn {
	cn := &conn{s: s, c: c, via: via, actor: actor}
	cn.ahead.c = c
	return cn
}

// serve reads requests until the client closes, a timeout, an error or a
// CONNECT (which takes the connection over). Every refusal after the
// request line arrived is answered before the connection closes.
func (c *conn) serve() {
	cfg := &c.s.cfg
	c.br = c.s.bufs.reader(&c.ahead)
	defer c.releaseBufs()
	for first := true; ; first = false {
		wait := cfg.IdleTimeout
		if first && c.tunnel == nil {
			wait = cfg.HandshakeTimeout
		}
		c.readBy(wait)
		h, line, err := c.readHead(cfg.MaxHeaderBytes)
		if err != nil {
			c.headFailed(err, line)
			return
		}
		req, err := http.ReadRequest(c.br)
		if err == nil {
			err = h.checkParsed(req)
		}
		if err != nil {
			if wire.CodeOf(err) == wire.CodeInternal { // net/http's own refusal
				err = wire.Errorf(egressdapi.CodeInvalidRequest, "malformed HTTP/1.1 request")
			}
			c.reject(c.bundle(), err, true, pipeline.OpRequest, nil)
			return
		}
		c.setHost(h.host)
		if !c.handle(req) {
			return
		}
	}
}

// headFailed answers a head that could not be read: too large (413), a
// timeout once a line had arrived (408), or malformed, cut short or
// refused by checkHead (400); a connection that ends, resets or times
// out before a line arrived is closed without an answer (there was no
// request).
func (c *conn) headFailed(err error, line bool) {
	var refusal error
	switch {
	case errors.Is(err, errHeadTooLarge):
		refusal = wire.Errorf(egressdapi.CodeTooLarge, "request header is larger than %d bytes", c.s.cfg.MaxHeaderBytes)
	case isTimeout(err):
		if line {
			refusal = timedOut(wire.Errorf(egressdapi.CodeTimeout, "the request header did not arrive in time"))
		}
	case errors.Is(err, errHeadCut):
		refusal = wire.Errorf(egressdapi.CodeInvalidRequest, "the connection ended inside the request header")
	case wire.CodeOf(err) != wire.CodeInternal:
		refusal = err // checkHead's
	}
	if refusal != nil {
		c.reject(c.bundle(), refusal, true, pipeline.OpRequest, nil)
	}
}

// setHost keeps the Host field's value, as a string made only when it
// changes.
func (c *conn) setHost(h []byte) {
	if string(h) != c.host {
		c.host = string(h)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// handle answers one request and reports whether the connection may carry
// another.
func (c *conn) handle(req *http.Request) bool {
	if len(req.TransferEncoding) > 0 || !req.ProtoAtLeast(1, 1) {
		// net/http read the body as chunked and dropped any Content-Length
		// beside it; RFC 9112 section 6.3 then asks the server to close
		// the connection after responding, since the two framings may
		// mean a smuggling attempt. For HTTP/1.0 net/http drops a
		// Transfer-Encoding unseen and reads by Content-Length, so an
		// HTTP/1.0 connection is never kept alive either (section 6.1).
		// Both are rare from proxy clients.
		req.Close = true
	}
	if c.tunnel == nil && req.Method == http.MethodConnect {
		c.connect(req)
		return false
	}
	b, rawURL, err := c.target(req)
	if err != nil {
		drained := drain(req.Body, c.s.cfg.MaxBody)
		c.rejectErr(b, req, err, req.Close || !drained)
		return !req.Close && drained
	}
	if !c.s.invRequests.take(b.Invocation) {
		// Refused unread: the body may be large, so the connection closes.
		c.rejectErr(b, req, wire.Errorf(wire.CodeServerBusy, "too many requests in flight for this invocation (at most %d)", c.s.cfg.MaxRequestsPerInvocation), true)
		return false
	}
	// The slot is held while the body is read and the answer's header is
	// awaited; a streaming answer holds nothing buffered and gives it
	// back, so long streams do not count against the invocation's share.
	slot := true
	giveSlot := func() {
		if slot {
			slot = false
			c.s.invRequests.give(b.Invocation)
		}
	}
	defer giveSlot()
	streamed := c.s.streams(b, req, rawURL)
	var body, first []byte
	primed := false
	if streamed && !expectsContinue(req) {
		var whole bool
		var err error
		if first, whole, err = c.prime(req); err != nil {
			c.rejectErr(b, req, err, true)
			return false
		}
		primed, streamed, body = true, !whole, first
	}
	if !streamed && !primed {
		var held int
		var err error
		body, held, err = c.s.readBody(req, func() { c.readBy(c.s.cfg.ExchangeIdle) }, c.continue100)
		defer c.s.budget.Give(held)
		if err != nil {
			c.rejectErr(b, req, err, true)
			return false
		}
	}
	if c.fields == nil { // c.tunnel is set before c serves and does not change
		c.fields = map[string]any{"via": c.via}
		if c.tunnel != nil {
			c.fields["tunnel"] = c.tunnel.authority()
			if c.tunnel.transparent != "" {
				c.fields[keyTransparent] = c.tunnel.transparent
			}
		}
	}
	in := pipeline.Input{Invocation: b.Invocation, Method: req.Method, URL: rawURL, Body: body, Actor: c.actor,
		Bundle: b, Substitute: true, Fields: c.fields} // the pipeline copies Fields, never writes them
	if wantsWebSocket(req) {
		in.Upgrade = "websocket"
	}
	n := 0
	for _, vs := range req.Header {
		n += len(vs)
	}
	// The pipeline reads the fields and keeps none of them (nor the
	// slice) past DoStream, so the connection's slice is reused.
	in.Header = slices.Grow(c.fieldBuf[:0], n)
	defer func() { clear(in.Header); c.fieldBuf = in.Header[:0] }() // holding no request's strings
	for name, vs := range req.Header {
		if name == "Content-Length" || name == "Transfer-Encoding" { // framing was read already
			continue
		}
		for _, v := range vs {
			in.Header = append(in.Header, request.Field{Name: name, Value: v})
		}
	}
	ctx, cancel := context.WithCancelCause(c.s.ctx)
	defer cancel(nil)
	watch := &lateWatch{c: c, cancel: cancel}
	defer watch.stop()
	// A streamed body is read by the pipeline as it sends it: the watch
	// for the client going away starts once it has been read whole, and
	// the connection carries another request only then.
	if streamed {
		sb, info := c.upload(&in, req, first, watch)
		defer info.close() // before any answer is written (also on a panic)
		st, err := c.s.cfg.Pipeline.DoStream(ctx, in)
		info.close()
		if err != nil && sb.claim() && !expectsContinue(req) && drain(req.Body, c.s.cfg.MaxBody) {
			// Refused before any of the body was read: it is read and
			// dropped, as a refused buffered body is, and the connection
			// may carry another request.
			sb.eof.Store(true)
		}
		if !sb.done() {
			req.Close = true // what is left of the body cannot be framed: the answer says so
		}
		return c.answer(req, b, st, err, giveSlot, watch) && sb.done()
	}
	watch.start()
	info := &interim{c: c}
	defer info.close() // before any answer is written (also on a panic)
	if req.ProtoAtLeast(1, 1) {
		// The upstream's 1xx other than 100 (a 103 Early Hints to a
		// GET) are relayed as for a streamed body (RFC 9110 section
		// 15.2: never to an HTTP/1.0 client).
		in.Informational = info.relay
	}
	st, err := c.s.cfg.Pipeline.DoStream(ctx, in)
	info.close()
	return c.answer(req, b, st, err, giveSlot, watch)
}

// answer writes the pipeline's answer to req (or its refusal) and
// reports whether the connection may carry another request.
func (c *conn) answer(req *http.Request, b *bundle.Bundle, st *pipeline.Stream, err error, giveSlot func(), watch *lateWatch) bool {
	giveSlot()
	if err != nil {
		if wire.CodeOf(err) == egressdapi.CodeClientClosed {
			return false // nobody to answer
		}
		c.refuse(err, req.Close) // the pipeline audited it
		return !req.Close
	}
	if !c.s.takeStream(st, b.Invocation) {
		c.refuse(errStreams(c.s.cfg.MaxStreamsPerInvocation), req.Close)
		return !req.Close
	}
	defer c.s.invStreams.give(b.Invocation)
	if st.Upgraded() != nil {
		watch.stop() // the relay reads the client from here on
		c.rdl = time.Time{}
		_ = c.c.SetReadDeadline(time.Time{})
		return c.websocket(st)
	}
	return c.stream(req, st)
}

// takeStream takes one of inv's stream slots for st, or ends st (its
// after record says server.busy) and reports false.
func (s *Server) takeStream(st *pipeline.Stream, inv string) bool {
	if s.invStreams.take(inv) {
		return true
	}
	st.End("stream_cap", errStreams(s.cfg.MaxStreamsPerInvocation))
	st.Close()
	return false
}

func errStreams(n int) error {
	return wire.Errorf(wire.CodeServerBusy, "too many answers streaming for this invocation (at most %d)", n)
}

// readBody reads req's body whole, at most MaxBody bytes, holding its
// size in the server's buffer budget (the caller gives back held bytes,
// also on error). progress, when set, runs before each read (it moves
// the connection's read deadline). A client that sent "Expect:
// 100-continue" is told to go on first by cont, when set (RFC 9110
// section 10.1.1): egressd reads the body itself before the upstream
// sees the request. Errors (the connection cannot carry another request
// after any): egress.too_large (413), server.busy (503, the budget is
// spent), egress.invalid_request (400, the framing broke),
// egress.timeout (408, the body stopped arriving).
func (s *Server) readBody(req *http.Request, progress func(), cont func() error) (body []byte, held int, err error) {
	if req.Body == http.NoBody || req.Body == nil {
		return nil, 0, nil
	}
	limit := s.cfg.MaxBody
	if req.ContentLength > int64(limit) {
		return nil, 0, wire.Errorf(egressdapi.CodeTooLarge, "body is larger than %d bytes", limit)
	}
	want := limit
	if req.ContentLength >= 0 {
		want = int(req.ContentLength)
	}
	// A body of announced length takes its whole size at once; a chunked
	// one takes the budget as it grows.
	step := min(want, 64<<10)
	if req.ContentLength >= 0 {
		step = want
	}
	if !s.budget.Take(step) {
		return nil, 0, errBudget(s.budget.Max())
	}
	held = step
	if cont != nil && expectsContinue(req) {
		if err := cont(); err != nil {
			return nil, held, clientGone(err)
		}
	}
	buf := make([]byte, 0, step)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return nil, held, wire.Errorf(egressdapi.CodeTooLarge, "body is larger than %d bytes", limit)
			}
			grow := min(max((len(buf)), 64<<10), limit+1-len(buf))
			if !s.budget.Take(grow) {
				return nil, held, errBudget(s.budget.Max())
			}
			held += grow
			buf = slices.Grow(buf, grow)
		}
		if progress != nil {
			progress() // the body keeps arriving: no byte for that long ends it
		}
		n, rerr := req.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if isTimeout(rerr) {
				return nil, held, timedOut(wire.Wrap(egressdapi.CodeTimeout, "the request body did not arrive in time", rerr))
			}
			// A body that breaks its framing (chunk sizes, line endings)
			// or ends early: what follows cannot be framed.
			return nil, held, wire.Wrap(egressdapi.CodeInvalidRequest, "malformed request body (chunked framing, or shorter than announced)", rerr)
		}
	}
	if len(buf) > limit {
		return nil, held, wire.Errorf(egressdapi.CodeTooLarge, "body is larger than %d bytes", limit)
	}
	return buf, held, nil
}

// continue100 writes "100 Continue" (RFC 9110 section 15.2.1).
func (c *conn) continue100() error {
	c.writeBy(c.s.cfg.ExchangeIdle)
	c.w().WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	return c.flush()
}

// expectsContinue reports whether req asks for a 100 (Continue) before
// sending its body (RFC 9110 section 10.1.1; HTTP/1.1 only).
func expectsContinue(req *http.Request) bool {
	return req.ProtoAtLeast(1, 1) && strings.EqualFold(strings.TrimSpace(req.Header.Get("Expect")), "100-continue")
}

func errBudget(budget int) error {
	return wire.Errorf(wire.CodeServerBusy, "egressd holds %d bytes of request bodies already (-buffer-budget); try again", budget)
}

// target authenticates req (outside a tunnel) and returns its bundle and
// absolute URL. The Host field, and inside a tunnel an absolute-form
// target's authority, must hold no held value (egress.secret_in_request;
// the pipeline scans the URL's host). Inside a tunnel, an absolute-form
// target or a Host that names another authority than the CONNECT's is
// refused (421).
func (c *conn) target(req *http.Request) (*bundle.Bundle, string, error) {
	if c.tunnel == nil {
		b, err := c.auth(req)
		if err != nil {
			return nil, "", err
		}
		if c.host != req.Host { // the same as the URL's authority: the pipeline scans that
			if err := c.s.cfg.Pipeline.ScanHostName(c.host); err != nil {
				return b, "", err
			}
		}
		u := req.RequestURI
		if !strings.HasPrefix(strings.ToLower(u), "http://") && !strings.HasPrefix(strings.ToLower(u), "https://") {
			return b, "", wire.Errorf(egressdapi.CodeInvalidRequest, "a proxy request needs an absolute-form http:// target or CONNECT")
		}
		return b, u, nil
	}
	t := c.tunnel
	if c.host != t.auth { // the tunnel's own authority was scanned at CONNECT
		if err := c.s.cfg.Pipeline.ScanHostName(c.host); err != nil {
			return t.b, "", err
		}
	}
	u := req.RequestURI
	if !strings.HasPrefix(u, "/") {
		scheme, rest, ok := strings.Cut(u, "://")
		auth, _, _ := strings.Cut(rest, "/")
		auth, _, _ = strings.Cut(auth, "?")
		if err := c.s.cfg.Pipeline.ScanHostName(auth); err != nil {
			return t.b, "", err
		}
		if !ok || !strings.EqualFold(scheme, t.scheme) || !c.sameAuthority(auth, t) {
			return t.b, "", misdirected(wire.Errorf(egressdapi.CodeInvalidRequest, "the request target names another authority than the tunnel's"))
		}
	} else {
		u = t.base + u
	}
	// Every Host field (net/http moves the first into req.Host) must name
	// the tunnel's authority.
	for _, h := range req.Header["Host"] {
		if !c.sameAuthority(h, t) {
			return t.b, "", errOtherHost()
		}
	}
	if req.Host != "" && !c.sameAuthority(req.Host, t) {
		return t.b, "", errOtherHost()
	}
	return t.b, u, nil
}

func errOtherHost() error {
	return misdirected(wire.Errorf(egressdapi.CodeHeaderInvalid, "Host names another authority than the tunnel's"))
}

// bundle returns the tunnel's bundle, or nil outside a tunnel.
func (c *conn) bundle() *bundle.Bundle {
	if c.tunnel == nil {
		return nil
	}
	return c.tunnel.b
}

func (c *conn) sameAuthority(a string, t *tunnel) bool {
	host, port, err := c.s.cfg.Pipeline.SplitHostPort(a)
	if port == 0 {
		port = netguard.DefaultPort(t.scheme)
	}
	return err == nil && host == t.host && port == t.port
}

// drain reads what is left of a refused request's body (at most max
// bytes) and reports whether it was all read.
func drain(body io.Reader, max int) bool {
	n, err := io.Copy(io.Discard, io.LimitReader(body, int64(max)+1))
	return err == nil && n <= int64(max)
}

// write sends one response with writeResponse and one flush.
func (c *conn) write(method string, status int, header []request.Field, body []byte, closeAfter bool) bool {
	c.writeBy(c.s.cfg.ExchangeIdle)
	writeResponse(c.w(), method, status, header, body, closeAfter)
	return c.flush() == nil
}
