package rpc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// Call is one request as a handler sees it. Body is canonical MessagePack
// (nil when empty); decode it with Decode.
type Call struct {
	Peer     sock.Peer // the caller's kernel credentials, read once per connection
	Op       string    // the op name, `area.verb`
	ID       []byte    // the request id, 16 bytes; a repeat before Deadline was refused (request.replayed)
	Deadline time.Time // the request's deadline (at most 10 minutes ahead); ctx ends then
	Idem     string    // idempotency key, at most 64 bytes; "" = none
	Corr     string    // correlation id, at most 64 bytes of [A-Za-z0-9._-]; "" = none
	Body     []byte    // canonical MessagePack map; nil = empty

	kept    any       // what the Handler kept for its StreamFunc (Keep)
	release func(any) // releases kept when the stream does not start
	upload  *Stream   // an Upload op's frames (Upload)
}

// Upload returns the stream of frames the caller sends after its request
// to an Upload op (Op.Upload), nil for any other op. The Handler may read
// it (Recv, from one goroutine at a time; it sets its own read deadlines:
// none is set) and hand the reading on with Keep: the StreamFunc gets this
// Stream. Nothing may be sent on it before the Handler has returned, since
// the answer goes first.
func (c *Call) Upload() *Stream { return c.upload }

// Keep hands v from an op's Handler to its StreamFunc, which reads it
// back with Kept: something the Handler opened for the stream it
// accepts (an upstream answer under way, a connection to a holder). When
// the stream does not start — the Handler returned an error or panicked
// after Keep, the op has no StreamFunc, or the accepting response could
// not be written (the peer went away) — the server calls release(v)
// instead, once, after the Handler returned, so nothing the Handler
// opened is left behind. Once the StreamFunc runs, v is its to close.
// Call Keep at most once, from the Handler; release may be nil.
func (c *Call) Keep(v any, release func(any)) { c.kept, c.release = v, release }

// Kept returns the value the op's Handler passed to Keep (nil: none).
func (c *Call) Kept() any { return c.kept }

// releaseKept releases what Keep holds, if anything, once.
func (c *Call) releaseKept() {
	v, release := c.kept, c.release
	c.kept, c.release = nil, nil
	if release != nil {
		release(v)
	}
}

// Decode decodes the body strictly into v (a pointer to the op's request
// struct): unknown fields are request.unknown_field, wrong kinds
// frame.malformed. The error's Msg names neither the field nor its value
// (both are the caller's input, which may hold a secret); the detailed
// error is wrapped, for logs only.
func (c *Call) Decode(v any) error {
	err := wire.Unmarshal(c.Body, v, true)
	if err == nil {
		return nil
	}
	switch code := wire.CodeOf(err); code {
	case wire.CodeRequestUnknownField:
		return wire.Wrap(code, "request body has a field this op does not accept", err)
	case wire.CodeFrameMalformed:
		return wire.Wrap(code, "request body does not match the op's schema", err)
	}
	return err
}

// serveConn answers requests on c one at a time until the peer closes, a
// frame-level error occurs, or the server stops. idle is set while c waits
// for a request, so shutdown can end it. Handlers run under hctx, which
// outlives ctx by the shutdown grace; streams run under ctx.
func (s *Server) serveConn(ctx, hctx context.Context, c *sock.Conn, idle *atomic.Bool) {
	sc := &srvConn{Conn: c, s: s, br: bufio.NewReaderSize(c, connBufSize), idle: idle}
	for !s.closing.Load() {
		payload, err := s.readFrame(sc)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return
			}
			code := wire.CodeOf(err)
			if code == wire.CodeInternal { // a timeout or a broken connection
				sc.log().Info("rpc.conn_closed", slog.String("reason", "read: "+classifyNetErr(err)))
				return
			}
			s.protocolError(ctx, sc, nil, "", err)
			return // frame-level errors end the connection
		}
		req, err := wire.DecodeRequest(payload, s.cfg.Limits)
		if err != nil {
			s.protocolError(ctx, sc, req.ID, req.Corr, err)
			if wire.CodeOf(err) == wire.CodeFrameMalformed {
				return
			}
			continue
		}
		if !s.handle(ctx, hctx, sc, req) {
			return
		}
	}
}

// connBufSize is the read buffer of each connection: a typical request
// arrives whole in one read(2).
const connBufSize = 4096

// srvConn is one served connection with its read buffer, a reusable write
// buffer and a logger made on first use.
type srvConn struct {
	*sock.Conn
	s    *Server
	br   *bufio.Reader
	wbuf []byte
	idle *atomic.Bool // set while waiting for a request
	lg   *slog.Logger
}

// log returns the connection's logger, with the daemon and peer fields.
func (sc *srvConn) log() *slog.Logger {
	if sc.lg == nil {
		sc.lg = sc.s.cfg.Logger.With(slog.Uint64("peer_uid", uint64(sc.Peer.UID)), slog.Int64("peer_pid", int64(sc.Peer.PID)))
	}
	return sc.lg
}

func classifyNetErr(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "closed"
}

// readFrame reads one frame: the first byte may take IdleTimeout, the rest
// of the frame must arrive within ReadTimeout, so a client that trickles one
// byte a second is cut off.
func (s *Server) readFrame(sc *srvConn) ([]byte, error) {
	if sc.br.Buffered() == 0 {
		sc.idle.Store(true)
		sc.SetReadDeadline(s.cfg.Now().Add(s.cfg.IdleTimeout))
		if s.closing.Load() { // shutdown began before the deadline above was set
			return nil, net.ErrClosed
		}
		_, err := sc.br.Peek(1)
		sc.idle.Store(false)
		if err != nil {
			return nil, err
		}
	}
	if !frameBuffered(sc.br) { // else no read(2) follows: no deadline to set
		sc.SetReadDeadline(s.cfg.Now().Add(s.cfg.ReadTimeout))
	}
	return readFrame(sc.br, s.cfg.MaxFrame)
}

// frameBuffered reports whether br already holds a whole frame, header and
// payload, so reading it makes no read(2).
func frameBuffered(br *bufio.Reader) bool {
	n := br.Buffered()
	if n < 4 {
		return false
	}
	hdr, _ := br.Peek(4)
	return uint64(binary.BigEndian.Uint32(hdr)) <= uint64(n-4)
}

// protocolError answers once with the error, logs it once and audits it.
// A request whose corr is invalid is audited without it, and an unknown
// field is not named: both are the caller's input.
func (s *Server) protocolError(ctx context.Context, c *srvConn, id []byte, corr string, err error) {
	we := wire.AsError(err)
	if !validCorr(corr) {
		corr = ""
	}
	if we.Code == wire.CodeRequestUnknownField {
		c.logUnknownField("", corr, err)
		we.Msg = "request envelope has an unknown field"
	}
	c.log().Warn("rpc.protocol_error", slog.String("code", we.Code), slog.String("msg", we.Msg))
	if s.cfg.Audit != nil {
		s.cfg.Audit(ctx, Event{Peer: c.Peer, Outcome: "error", Code: we.Code, Corr: corr})
	}
	s.writeResponse(c, &wire.Response{ID: idOrEmpty(id), Err: errBody(we)})
}

// maxLoggedField bounds, in bytes, the field path rpc.unknown_field logs.
const maxLoggedField = 256

// logUnknownField logs the path of the unknown field err names
// ("body.spec.zz", or an envelope key), which its answer leaves out: the
// field name is the caller's input and may hold a secret, so it goes
// only to the daemon's log, whose handler redacts it (lib/daemon's
// logger: held values and key=value shapes), cut to maxLoggedField bytes
// (docs/protocol.md, "Unknown fields"). op is "" for the envelope.
func (c *srvConn) logUnknownField(op, corr string, err error) {
	path := ""
	for e := err; e != nil; e = errors.Unwrap(e) {
		if we, ok := e.(*wire.Error); ok && we.Code == wire.CodeRequestUnknownField {
			path = we.Msg // the innermost names the field: "unknown field body.x"
		}
	}
	path = strings.TrimPrefix(strings.TrimPrefix(path, "unknown field "), "unknown request field ")
	if u, err := strconv.Unquote(path); err == nil {
		path = "envelope." + u
	}
	if len(path) > maxLoggedField {
		path = path[:maxLoggedField] + "..."
	}
	c.log().Info("rpc.unknown_field", slog.String("op", op), slog.String("corr", corr), slog.String("field", path))
}

// validCorr reports whether corr is a well-formed correlation id: at most
// wire.MaxCorrLen bytes of [A-Za-z0-9._-].
func validCorr(corr string) bool {
	if len(corr) > wire.MaxCorrLen {
		return false
	}
	for i := 0; i < len(corr); i++ {
		b := corr[i]
		if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '.' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}

func idOrEmpty(id []byte) []byte {
	if id == nil {
		return []byte{}
	}
	return id
}

func errBody(e *wire.Error) *wire.ErrorBody {
	r := e.Retry
	if r == "" {
		r = wire.RetryNever
	}
	return &wire.ErrorBody{Code: e.Code, Msg: e.Msg, Retry: r}
}

// writeResponse writes r as one frame with a single write, in c's reusable
// buffer.
func (s *Server) writeResponse(c *srvConn, r *wire.Response) error {
	c.SetWriteDeadline(s.cfg.Now().Add(s.cfg.ReadTimeout))
	frame, err := finishFrame(wire.AppendResponse(beginFrame(c.wbuf), r), s.cfg.MaxFrame)
	if err != nil {
		return err
	}
	_, err = c.Write(frame)
	c.wbuf = keepBuf(frame)
	return err
}

// handle runs one decoded request; it reports whether the connection may
// carry another request.
func (s *Server) handle(ctx, hctx context.Context, c *srvConn, req *wire.Request) bool {
	op, call, err := s.admit(c, req)
	if err != nil {
		we := wire.AsError(err)
		outcome := "error"
		if we.Code == wire.CodePeerDenied {
			outcome = "denied"
		}
		// An op name is logged and audited only when it is one of ours:
		// an unknown one is the caller's free text.
		opName := ""
		if _, known := s.ops[req.Op]; known {
			opName = req.Op
		}
		c.log().Warn("rpc.refused", slog.String("op", opName), slog.String("code", we.Code), slog.String("corr", req.Corr))
		if s.cfg.Audit != nil {
			s.cfg.Audit(ctx, Event{Op: opName, Peer: c.Peer, Outcome: outcome, Code: we.Code, Corr: req.Corr})
		}
		// An Upload op's caller may have sent frames after the request,
		// which cannot be read as requests: the connection ends.
		upload := opName != "" && s.ops[opName].Upload
		return s.writeResponse(c, &wire.Response{ID: req.ID, Err: errBody(we)}) == nil && !upload
	}
	if op.Upload {
		call.upload = newStream(c.Conn, c.br, s.cfg.MaxFrame)
		c.SetReadDeadline(time.Time{}) // the Handler reads with deadlines of its own
	}
	rctx := newReqCtx(WithCorr(hctx, req.Corr), call.Deadline)
	defer rctx.stop()
	body, werr := s.run(rctx, c, op, call)
	streaming := false
	defer func() {
		if !streaming {
			call.releaseKept() // the stream never started: free what its Handler kept
		}
	}()
	resp := &wire.Response{ID: req.ID, OK: werr == nil, Body: body}
	if werr != nil {
		resp.Err = errBody(werr)
	}
	if err := s.writeResponse(c, resp); err != nil {
		c.log().Info("rpc.conn_closed", slog.String("reason", "write: "+classifyNetErr(err)), slog.String("op", op.Name))
		return false
	}
	if op.Upload && werr != nil {
		return false // the caller's frames may follow: nothing more can be framed
	}
	if op.Stream == nil || werr != nil {
		return true
	}
	st := call.upload
	if st == nil {
		c.SetDeadline(time.Time{})
		st = newStream(c.Conn, c.br, s.cfg.MaxFrame)
	} else {
		c.SetWriteDeadline(time.Time{}) // the reads keep the Handler's deadlines
	}
	sctx, scancel := context.WithCancel(WithCorr(ctx, req.Corr))
	defer scancel()
	// When the server stops, a StreamFunc blocked in Recv is woken: its
	// read fails at once, and it may still Send a last frame.
	stopRead := context.AfterFunc(sctx, func() { c.SetReadDeadline(time.Unix(1, 0)) })
	defer stopRead()
	streaming = true // what the Handler kept is the StreamFunc's now
	if err := op.Stream(sctx, call, st); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
		we := wire.AsError(err)
		if sctx.Err() != nil && we.Code == wire.CodeInternal {
			we = &wire.Error{Code: wire.CodeServerShuttingDown, Msg: "server stopped the stream", Retry: wire.RetryAfterObserve}
		}
		c.log().Info("rpc.stream_end", slog.String("op", op.Name), slog.String("code", we.Code))
		_ = st.Send(&wire.StreamFrame{T: wire.StreamError, Code: we.Code, Msg: we.Msg})
	}
	return false
}

// authError turns an Authenticate failure into the error the peer gets:
// a *wire.Error keeps its code, anything else becomes peer.denied with a
// generic message (the reason stays in the daemon's own records).
func authError(err error) error {
	if err == nil {
		return nil
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	return wire.Errorf(wire.CodePeerDenied, "peer is not allowed")
}

// admit applies the checks every request passes before its handler, in
// this order: peer holds a role here, op known, peer holds the op's role,
// deadline in (now, now+MaxDeadline], id not replayed, idempotency key
// present when required.
func (s *Server) admit(c *srvConn, req *wire.Request) (*Op, *Call, error) {
	if !s.cfg.Roles.Any(c.Peer.UID) {
		return nil, nil, wire.Errorf(wire.CodePeerDenied, "peer is not allowed")
	}
	if s.cfg.Authenticate != nil {
		if err := authError(s.cfg.Authenticate(c.Peer)); err != nil {
			return nil, nil, err
		}
	}
	op, ok := s.ops[req.Op]
	if !ok {
		return nil, nil, wire.Errorf(wire.CodeOpUnknown, "this daemon does not serve that op")
	}
	if len(op.Roles) > 0 && !s.cfg.Roles.Allows(c.Peer.UID, op.Roles) {
		return nil, nil, wire.Errorf(wire.CodePeerDenied, "peer is not allowed to call %s", op.Name)
	}
	now := s.cfg.Now()
	deadline := time.UnixMilli(req.Deadline)
	if !deadline.After(now) {
		return nil, nil, retry(wire.Errorf(wire.CodeRequestDeadline, "deadline has passed"), wire.RetrySafe)
	}
	if deadline.Sub(now) > s.cfg.MaxDeadline {
		return nil, nil, retry(wire.Errorf(wire.CodeRequestDeadline, "deadline is more than %s ahead", s.cfg.MaxDeadline), wire.RetrySafe)
	}
	var id [16]byte
	copy(id[:], req.ID)
	fresh, full := s.replay.add(c.Peer.UID, id, deadline, now)
	if full {
		return nil, nil, &wire.Error{Code: wire.CodeServerBusy, Msg: "replay cache is full", Retry: wire.RetrySafe}
	}
	if !fresh {
		return nil, nil, retry(wire.Errorf(wire.CodeRequestReplayed, "request id was already used"), wire.RetryAfterObserve)
	}
	if op.IdemRequired && req.Idem == "" {
		return nil, nil, wire.Errorf(wire.CodeRequestIdemRequired, "%s requires an idempotency key", op.Name)
	}
	return op, &Call{Peer: c.Peer, Op: req.Op, ID: req.ID, Deadline: deadline, Idem: req.Idem, Corr: req.Corr, Body: req.Body}, nil
}

// retry sets e's retry hint to the one docs/protocol.md gives its code.
func retry(e *wire.Error, r wire.Retry) *wire.Error {
	e.Retry = r
	return e
}

// run calls the handler, through the idempotency store when the request
// carries a key, and encodes its answer.
func (s *Server) run(ctx context.Context, c *srvConn, op *Op, call *Call) ([]byte, *wire.Error) {
	if call.Idem == "" || op.Stream != nil {
		return s.invoke(ctx, c, op, call)
	}
	k := idemKey{uid: call.Peer.UID, op: op.Name, key: call.Idem}
	e, first, err := s.idem.begin(k, call.Body, s.cfg.Now())
	if err != nil {
		return nil, wire.AsError(err)
	}
	if !first {
		return e.wait(ctx)
	}
	body, werr := s.invoke(ctx, c, op, call)
	s.idem.finish(k, e, body, werr)
	return body, werr
}

func (s *Server) invoke(ctx context.Context, c *srvConn, op *Op, call *Call) (body []byte, werr *wire.Error) {
	defer func() {
		if r := recover(); r != nil {
			c.log().Error("rpc.handler_panic", slog.String("op", op.Name), slog.String("panic", fmt.Sprint(r)))
			body, werr = nil, wire.AsError(fmt.Errorf("panic in %s", op.Name))
		}
	}()
	v, err := op.Handler(ctx, call)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && wire.CodeOf(err) == wire.CodeInternal {
			// The handler gave up because its context ended.
			if errors.Is(cerr, context.DeadlineExceeded) {
				return nil, &wire.Error{Code: wire.CodeRequestDeadline, Msg: "deadline passed before the answer", Retry: wire.RetryAfterObserve}
			}
			return nil, &wire.Error{Code: wire.CodeServerShuttingDown, Msg: "server stopped before the answer", Retry: wire.RetryAfterObserve}
		}
		we := wire.AsError(err)
		switch we.Code {
		case wire.CodeInternal:
			c.log().Error("rpc.handler_error", slog.String("op", op.Name), slog.String("corr", call.Corr), slog.Any("err", err))
		case wire.CodeRequestUnknownField:
			c.logUnknownField(op.Name, call.Corr, err)
		}
		return nil, we
	}
	b, err := wire.Marshal(v)
	if err != nil {
		c.log().Error("rpc.encode_error", slog.String("op", op.Name), slog.Any("err", err))
		return nil, wire.AsError(err)
	}
	return b, nil
}
