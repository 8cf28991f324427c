package rpc

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// Handler runs one op. It decodes call's body with call.Decode and returns
// the response body (a struct with msgpack tags, a map, or nil) or an error;
// an error without a code reaches the peer as `internal` with a generic
// message, and is logged.
type Handler func(ctx context.Context, call *Call) (any, error)

// StreamFunc runs a stream after its op's Handler accepted it and the
// accepting response was sent. It owns st until it returns; the connection
// is closed afterwards.
type StreamFunc func(ctx context.Context, call *Call, st *Stream) error

// Op describes one op in a server's table.
type Op struct {
	Name         string     // `area.verb`, or `health`
	Roles        []Role     // roles allowed to call it; empty = any role of this daemon
	Handler      Handler    // required
	Stream       StreamFunc // set for stream ops
	IdemRequired bool       // refuse requests without an idempotency key (request.idempotency_required)
	// Upload marks a stream op whose caller sends stream frames right
	// after its request, before the answer (a request body sent as it is
	// produced): the Handler reads them from Call.Upload while it works,
	// and the StreamFunc gets the same Stream. The connection carries no
	// request after an Upload op: a refusal closes it once written (the
	// caller's frames may follow the request). Requires Stream.
	Upload bool
}

// Listener is what a Server accepts connections from: *sock.Listener.
type Listener interface {
	AcceptConn() (*sock.Conn, error)
	Close() error
}

// Event describes one decision the server made itself (a denial or a
// protocol error), for the daemon's audit log. Handlers audit their own ops.
type Event struct {
	Op      string    // an op the server serves, "connect" for a peer refused at connect; "" otherwise (an unknown name is the caller's text)
	Peer    sock.Peer // the caller's kernel credentials
	Outcome string    // "denied" or "error"
	Code    string    // the error code answered (peer.denied, frame.malformed, ...)
	Corr    string    // the request's correlation id; "" = none or unread
}

// Config holds a Server's settings. Zero values take the defaults noted.
type Config struct {
	Daemon      string                       // name in logs and audit
	Roles       Roles                        // role → UIDs; a peer with no role gets peer.denied for every op
	Logger      *slog.Logger                 // required; use the redacting handler
	Audit       func(context.Context, Event) // optional sink for denials and protocol errors
	MaxConns    int                          // concurrent connections; default 128
	IdleTimeout time.Duration                // wait for a request's first byte; default 60 s
	ReadTimeout time.Duration                // read a frame once it has started; default 10 s
	MaxFrame    int                          // default wire.DefaultMaxFrame
	MaxDeadline time.Duration                // furthest deadline accepted; default 10 min
	IdemTTL     time.Duration                // idempotency record life; default 24 h
	IdleAfter   time.Duration                // with OnIdle: call it after this long without connections
	OnIdle      func()                       // idle-shutdown hook
	Now         func() time.Time             // default time.Now
	Limits      wire.Limits                  // decoder caps
	// Authenticate, when set, is a second check after the role check,
	// with the peer's kernel credentials (e.g. the helper's
	// executable-hash allowlist). It runs when a connection is accepted,
	// before the connection takes a regular slot (a refused peer's first
	// request is answered with the error under its id, then the
	// connection is closed), and again before every request
	// (the peer may have exec'ed another program since), so it must be
	// cheap when nothing changed. A *wire.Error reaches the peer as is;
	// any other error as peer.denied.
	Authenticate func(sock.Peer) error
}

// Server serves a table of ops over Unix sockets. Create with NewServer.
type Server struct {
	cfg     Config
	ops     map[string]*Op
	replay  *replayCache
	idem    *idemStore
	sem     chan struct{}
	denySem chan struct{} // slots for peers that hold no role: they never take a role holder's slot
	authSem chan struct{} // slots for connections whose peer Authenticate has not yet accepted
	active  atomic.Int64
	lastAct atomic.Int64 // unix nanos of the last connection close
	authing atomic.Int64 // connections under Config.Authenticate, not yet tracked
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[*sock.Conn]*atomic.Bool // open connections → waiting for a request
	closing atomic.Bool
}

// NewServer validates cfg and the op table. Errors: a duplicate or unnamed
// op, a missing handler, an Upload op without a StreamFunc, or a missing
// logger.
func NewServer(cfg Config, ops ...Op) (*Server, error) {
	if cfg.Logger == nil {
		return nil, errors.New("rpc.NewServer: Logger is required")
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 128
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 60 * time.Second
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 10 * time.Second
	}
	if cfg.MaxFrame <= 0 {
		cfg.MaxFrame = wire.DefaultMaxFrame
	}
	if cfg.MaxDeadline <= 0 {
		cfg.MaxDeadline = 10 * time.Minute
	}
	if cfg.IdemTTL <= 0 {
		cfg.IdemTTL = 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{
		cfg:    cfg,
		ops:    make(map[string]*Op, len(ops)),
		replay: newReplayCache(1 << 20),
		idem:   newIdemStore(cfg.IdemTTL, 1<<16, idemMaxBytes),
		sem:    make(chan struct{}, cfg.MaxConns),
		// A peer without any role only ever gets peer.denied; it gets a
		// small pool of its own, so idle connections from users who may
		// reach the socket but hold no role cannot lock role holders out.
		denySem: make(chan struct{}, max(1, cfg.MaxConns/8)),
		authSem: make(chan struct{}, max(1, cfg.MaxConns/8)),
		conns:   make(map[*sock.Conn]*atomic.Bool),
	}
	for i := range ops {
		op := ops[i]
		if op.Name == "" || op.Handler == nil {
			return nil, errors.New("rpc.NewServer: op needs a name and a handler")
		}
		if op.Upload && op.Stream == nil {
			return nil, errors.New("rpc.NewServer: upload op " + op.Name + " needs a StreamFunc")
		}
		if _, dup := s.ops[op.Name]; dup {
			return nil, errors.New("rpc.NewServer: duplicate op " + op.Name)
		}
		s.ops[op.Name] = &op
	}
	s.lastAct.Store(cfg.Now().UnixNano())
	return s, nil
}

// shutdownGrace bounds how long Serve waits for in-flight requests after
// it stops accepting; then their contexts are cancelled and their
// connections closed.
const shutdownGrace = 5 * time.Second

// Serve accepts connections from l until ctx is cancelled or l fails, then
// closes l and idle connections, waits up to shutdownGrace for in-flight
// requests to be answered (their contexts outlive ctx until then; stream
// contexts end with ctx), and returns nil on a cancelled ctx.
func (s *Server) Serve(ctx context.Context, l Listener) error {
	stop := context.AfterFunc(ctx, func() { s.closing.Store(true); l.Close() })
	defer stop()
	hctx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	var idleDone chan struct{}
	if s.cfg.OnIdle != nil && s.cfg.IdleAfter > 0 {
		// Idle time counts from here: the start-up before Serve (a
		// provider's negotiation can take seconds) is not idleness, and a
		// socket-activated daemon has its first connection waiting.
		s.lastAct.Store(s.cfg.Now().UnixNano())
		idleDone = make(chan struct{})
		go s.watchIdle(ctx, idleDone)
	}
	var err error
	for {
		c, aerr := l.AcceptConn()
		if aerr != nil {
			if ctx.Err() != nil || s.closing.Load() {
				break
			}
			var ne net.Error
			if errors.As(aerr, &ne) && ne.Timeout() {
				continue
			}
			if wire.CodeOf(aerr) == sock.CodePeerUnknown {
				s.cfg.Logger.Warn("rpc.peer_rejected", slog.String("code", sock.CodePeerUnknown))
				continue
			}
			err = aerr
			break
		}
		if s.cfg.Authenticate != nil && s.cfg.Roles.Any(c.Peer.UID) {
			s.authenticate(ctx, hctx, c)
			continue
		}
		sem := s.sem
		if !s.cfg.Roles.Any(c.Peer.UID) {
			sem = s.denySem
		}
		select {
		case sem <- struct{}{}:
		default:
			s.refuse(c, wire.CodeServerBusy, "too many connections")
			continue
		}
		idle := s.track(c, true)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-sem }()
			defer s.track(c, false)
			s.serveConn(ctx, hctx, c, idle)
		}()
	}
	s.closing.Store(true)
	l.Close()
	s.closeIdle()
	s.drain(shutdownGrace, hardStop)
	if idleDone != nil {
		<-idleDone
	}
	return err
}

// authenticate runs Config.Authenticate for a new connection off the
// accept loop (hashing a peer's executable can take milliseconds), in a
// small pool of its own: a peer that holds a role but fails the check
// never takes one of the role holders' connection slots, and is refused
// before it can send a request. A peer that passes takes a regular slot
// (or gets server.busy).
func (s *Server) authenticate(ctx, hctx context.Context, c *sock.Conn) {
	select {
	case s.authSem <- struct{}{}:
	default:
		s.refuse(c, wire.CodeServerBusy, "too many connections")
		return
	}
	// A connection under authentication is activity: hashing a peer's
	// executable can outlast the idle timeout on a loaded machine, and
	// the daemon must not exit idle while a peer waits for its answer.
	s.authing.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.lastAct.Store(s.cfg.Now().UnixNano())
			s.authing.Add(-1)
		}()
		err := authError(s.cfg.Authenticate(c.Peer))
		<-s.authSem
		if err != nil {
			we := wire.AsError(err)
			if s.cfg.Audit != nil {
				s.cfg.Audit(ctx, Event{Op: "connect", Peer: c.Peer, Outcome: "denied", Code: we.Code})
			}
			s.denyFirst(c, we)
			return
		}
		select {
		case s.sem <- struct{}{}:
		default:
			s.refuse(c, wire.CodeServerBusy, "too many connections")
			return
		}
		defer func() { <-s.sem }()
		idle := s.track(c, true)
		defer s.track(c, false)
		s.serveConn(ctx, hctx, c, idle)
	}()
}

// deniedFrameMax bounds the request a refused peer may send before its
// answer (a request that needs more gets the answer with an empty id).
const deniedFrameMax = 64 << 10

// denyFirst answers a connection whose peer Authenticate refused: it
// reads the peer's first request (within ReadTimeout, at most
// deniedFrameMax bytes), answers it with we under that request's id — as
// every error is answered, docs/protocol.md — and closes the
// connection; an id that cannot be read (nothing sent, a broken or
// oversized frame) gets the empty id. The wait takes a slot of the pool
// of peers without a role, never a role holder's, and shutdown ends it
// like an idle connection; with that pool full the answer goes at once,
// with the empty id.
func (s *Server) denyFirst(c *sock.Conn, we *wire.Error) {
	select {
	case s.denySem <- struct{}{}:
		defer func() { <-s.denySem }()
	default:
		s.refuseRetry(c, we.Code, we.Msg, we.Retry)
		return
	}
	idle := s.track(c, true)
	defer s.track(c, false)
	idle.Store(true)
	c.SetReadDeadline(s.cfg.Now().Add(s.cfg.ReadTimeout))
	var id []byte
	if !s.closing.Load() {
		if payload, err := readFrame(bufio.NewReaderSize(c, connBufSize), min(s.cfg.MaxFrame, deniedFrameMax)); err == nil {
			req, _ := wire.DecodeRequest(payload, s.cfg.Limits)
			if req != nil {
				id = req.ID
			}
		}
	}
	idle.Store(false)
	c.SetWriteDeadline(s.cfg.Now().Add(time.Second))
	payload := wire.AppendResponse(nil, &wire.Response{ID: idOrEmpty(id), Err: errBody(we)})
	_ = wire.WriteFrame(c, payload, s.cfg.MaxFrame)
	s.cfg.Logger.Warn("rpc.refused", slog.String("code", we.Code), slog.Uint64("peer_uid", uint64(c.Peer.UID)))
}

// closeIdle ends the connections that wait for a request: their pending
// read returns at once. A connection whose request is under way is left to
// finish it; serveConn checks closing before it reads the next one.
func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, idle := range s.conns {
		if idle.Load() {
			c.SetReadDeadline(time.Unix(1, 0))
		}
	}
}

// drain waits for connections to finish; after grace it cancels the
// requests' contexts (hardStop) and closes the rest.
func (s *Server) drain(grace time.Duration, hardStop context.CancelFunc) {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	hardStop()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	<-done
}

// track adds c to (or removes and closes it from) the open connections;
// on add it returns c's idle flag.
func (s *Server) track(c *sock.Conn, add bool) *atomic.Bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		idle := new(atomic.Bool)
		s.conns[c] = idle
		s.active.Add(1)
		return idle
	}
	delete(s.conns, c)
	c.Close()
	s.active.Add(-1)
	s.lastAct.Store(s.cfg.Now().UnixNano())
	return nil
}

// ActiveConns reports the number of open connections.
func (s *Server) ActiveConns() int { return int(s.active.Load()) }

func (s *Server) watchIdle(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(min(s.cfg.IdleAfter/4, time.Second) + time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			idleFor := s.cfg.Now().Sub(time.Unix(0, s.lastAct.Load()))
			if s.active.Load() == 0 && s.authing.Load() == 0 && idleFor >= s.cfg.IdleAfter {
				s.cfg.OnIdle()
				return
			}
		}
	}
}

// refuse answers a connection that will not be served once and closes it.
func (s *Server) refuse(c *sock.Conn, code, msg string) {
	s.refuseRetry(c, code, msg, wire.RetrySafe)
}

// refuseRetry is refuse with the retry hint the peer gets.
func (s *Server) refuseRetry(c *sock.Conn, code, msg string, retry wire.Retry) {
	c.SetWriteDeadline(s.cfg.Now().Add(time.Second))
	payload := wire.AppendResponse(nil, &wire.Response{ID: []byte{}, Err: &wire.ErrorBody{Code: code, Msg: msg, Retry: retry}})
	_ = wire.WriteFrame(c, payload, s.cfg.MaxFrame)
	s.cfg.Logger.Warn("rpc.refused", slog.String("code", code), slog.Uint64("peer_uid", uint64(c.Peer.UID)))
	c.Close()
}
