// Package proxy is egressd's standard proxy face (docs/egressd.md, "The proxy
// face"): an HTTP/1.1 forward proxy (RFC 9110 §9.3.6 CONNECT, RFC 9112 §3.2.2
// absolute-form) on a loopback TCP address and on <run>/egressd/proxy.sock.
//
// Every request authenticates with Proxy-Authorization: Basic
// base64(invocation:proxy_token) (else 407), unless the operator enabled
// anonymous use, which never gets substitution. Absolute-form http://
// requests go through the pipeline as they are. CONNECT is checked
// against the invocation's policy on the canonical authority; an
// invocation without credentials gets an opaque tunnel (bytes counted),
// one with credentials is always intercepted: egressd terminates TLS with
// a leaf from its local CA and sends each inner request through the
// pipeline, where placeholders are substituted at their staged targets
// (pipeline.Placements, pipeline.Substitute). Refusals are proxy responses
// with the error code in X-Hostkit-Error.
package proxy

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// Config holds a Server's dependencies and limits. Zero limits take the
// defaults noted.
type Config struct {
	Registry  *bundle.Registry     // the bundles, for proxy tokens and policies
	Pipeline  *pipeline.Pipeline   // the request pipeline every proxied request goes through
	Transport *transport.Transport // routes CONNECT authorities
	CA        *CA                  // issues the leaf certificates of intercepted tunnels
	Audit     pipeline.Auditor     // the audit sink
	Logger    *slog.Logger         // the redacting logger
	Anonymous *bundle.Bundle       // nil: anonymous use is refused (the default)

	MaxTunnels       int           // concurrent CONNECT tunnels, opaque or intercepted; default 512
	HandshakeTimeout time.Duration // first request header and TLS handshake; default 10 s
	IdleTimeout      time.Duration // between requests, and without traffic in a tunnel; default 120 s
	ExchangeIdle     time.Duration // longest no byte moves to or from the client while a request is in flight (its body, the answer); default 5 min
	DialTimeout      time.Duration // opaque tunnel upstream dial; default 10 s
	MaxHeaderBytes   int           // request line and header block; default 64 KiB
	MaxBody          int           // request body, read whole before the request is sent; default 32 MiB
	BufferBudget     int           // request body bytes held by all requests at once; default 256 MiB (past it: 503 server.busy)
	// Budget, when set, is the buffer budget shared with egressd's other
	// faces (egress.request_upload), used in place of one of
	// BufferBudget bytes.
	Budget *pipeline.Budget

	// MaxTunnelsPerInvocation bounds the tunnels one invocation holds at
	// once (default MaxTunnels/4), MaxRequestsPerInvocation its requests
	// in the pipeline at once (default 64: each may buffer MaxBody and the
	// response), and MaxConns the client connections of each listener
	// (default 4096; beyond, a new connection gets 503 server.busy and is
	// closed). Past a per-invocation bound the answer is 503
	// server.busy for that invocation only.
	MaxTunnelsPerInvocation  int
	MaxRequestsPerInvocation int // see MaxTunnelsPerInvocation
	MaxConns                 int // see MaxTunnelsPerInvocation
	// MaxStreamsPerInvocation bounds the answers one invocation streams
	// (and WebSocket connections it relays) at once, after their header
	// arrived and its request slot went back; default a quarter of
	// MaxConns. Past it the answer is refused with 503 server.busy
	// before any of it is written, so long streams of one invocation
	// cannot take every client connection.
	MaxStreamsPerInvocation int

	// AuthAuditRate and AuthAuditBurst bound the audit records of refusals
	// before any invocation is known (failed proxy authentications,
	// malformed or oversized requests outside a tunnel; token bucket:
	// records per second, bucket size; defaults 20 and 100). Any local
	// process can reach the TCP listener without a token, and a flood of
	// records would otherwise rotate the audit trail away. Past the bound
	// a refusal is still answered and is counted; the next such record
	// carries the count as "suppressed" (and Close writes one for a count
	// left over).
	AuthAuditRate  float64 // records per second
	AuthAuditBurst int     // the bucket's size, in records

	// ReregisterGrace is how long after New a request whose credentials
	// name a well-formed invocation without a bundle is answered 503
	// egress.unavailable with Retry-After: 1 instead of 407: a restart
	// forgot every bundle, and stagers re-register their running agents'
	// within seconds, so the agent is told to retry rather than that its
	// token is wrong. A wrong token of a registered invocation is 407 as
	// ever. 0 = no grace (tests; the flag's default is 10 s).
	ReregisterGrace time.Duration
}

// Server serves the proxy face on any number of listeners. Create with
// New; stop with Close.
type Server struct {
	cfg     Config
	started time.Time // New's time (monotonic): ReregisterGrace counts from it
	tunnels chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc

	invTunnels     *slots           // tunnels per invocation
	invRequests    *slots           // requests in the pipeline per invocation
	invStreams     *slots           // answers streaming per invocation
	budget         *pipeline.Budget // request body bytes held (Budget, or BufferBudget)
	authAudit      *rate.Limiter    // failed authentications' audit records
	authSuppressed atomic.Uint64    // failures not audited since the last record
	bufs           bufPools         // connections' readers and writers (bufs.go)

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]bool
	conns     map[net.Conn]bool
	wg        sync.WaitGroup
}

// New returns a Server.
func New(cfg Config) *Server {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.HandshakeTimeout, 10*time.Second)
	def(&cfg.IdleTimeout, 120*time.Second)
	def(&cfg.ExchangeIdle, 5*time.Minute)
	def(&cfg.DialTimeout, 10*time.Second)
	if cfg.MaxTunnels <= 0 {
		cfg.MaxTunnels = 512
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = 64 << 10
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 32 << 20
	}
	if cfg.BufferBudget <= 0 {
		cfg.BufferBudget = 256 << 20
	}
	if cfg.MaxTunnelsPerInvocation <= 0 {
		cfg.MaxTunnelsPerInvocation = max(1, cfg.MaxTunnels/4)
	}
	if cfg.MaxRequestsPerInvocation <= 0 {
		cfg.MaxRequestsPerInvocation = 64
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 4096
	}
	if cfg.MaxStreamsPerInvocation <= 0 {
		cfg.MaxStreamsPerInvocation = max(1, cfg.MaxConns/4)
	}
	if cfg.AuthAuditRate <= 0 {
		cfg.AuthAuditRate = 20
	}
	if cfg.AuthAuditBurst <= 0 {
		cfg.AuthAuditBurst = 100
	}
	if cfg.Budget == nil {
		cfg.Budget = pipeline.NewBudget(cfg.BufferBudget)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, started: time.Now(), tunnels: make(chan struct{}, cfg.MaxTunnels), ctx: ctx, cancel: cancel,
		listeners: map[net.Listener]bool{}, conns: map[net.Conn]bool{},
		budget:      cfg.Budget,
		authAudit:   rate.NewLimiter(rate.Limit(cfg.AuthAuditRate), cfg.AuthAuditBurst),
		invTunnels:  newSlots(cfg.MaxTunnelsPerInvocation),
		invRequests: newSlots(cfg.MaxRequestsPerInvocation), invStreams: newSlots(cfg.MaxStreamsPerInvocation)}
}

// inGrace reports whether the server is within ReregisterGrace of its
// start.
func (s *Server) inGrace() bool {
	return s.cfg.ReregisterGrace > 0 && time.Since(s.started) < s.cfg.ReregisterGrace
}

// Serve accepts connections on l until Close; via names the listener in
// audit records ("tcp" or "unix"). It returns nil after Close.
func (s *Server) Serve(l net.Listener, via string) error {
	if !s.track(l, nil, false) {
		l.Close()
		return nil
	}
	defer s.untrack(l, nil)
	// Each listener has its own MaxConns, so that TCP clients, which need
	// nothing to connect, cannot starve the Unix socket's.
	var clients atomic.Int64
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.cfg.Logger.Warn("proxy.accept_failed", slog.String("via", via), slog.Any("err", err))
			time.Sleep(50 * time.Millisecond) // e.g. EMFILE: do not spin
			continue
		}
		actor := audit.Actor{UID: -1}
		if sc, ok := c.(*sock.Conn); ok {
			actor = audit.Actor{UID: int(sc.Peer.UID), PID: int(sc.Peer.PID)}
		}
		if !s.track(nil, c, true) {
			c.Close()
			return nil
		}
		go func() {
			defer s.wg.Done()
			defer s.untrack(nil, c)
			if clients.Add(1) > int64(s.cfg.MaxConns) {
				clients.Add(-1)
				busy(c)
				return
			}
			defer clients.Add(-1)
			newConn(s, c, via, actor).serve()
		}()
	}
}

// Close stops every listener, closes every connection and tunnel, and
// waits for their goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	if n := s.authSuppressed.Swap(0); n > 0 {
		if _, err := s.cfg.Audit.Append(context.Background(), audit.Record{Actor: audit.Actor{UID: -1}, Op: OpAuth,
			Outcome: audit.OutcomeRefused, Code: wire.CodePeerDenied, Fields: map[string]any{keySuppressed: n}}); err != nil {
			s.cfg.Logger.Error("audit.append_failed", slog.String("op", OpAuth), slog.Any("err", err))
		}
	}
	return nil
}

// busy answers a connection over MaxConns with 503 server.busy and closes
// it, reading nothing (no audit record: that would let a flood write
// one per connection).
func busy(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	bw := bufio.NewWriterSize(c, 256)
	writeResponse(bw, "", http.StatusServiceUnavailable, []request.Field{{Name: HeaderError, Value: wire.CodeServerBusy}}, nil, true)
	_ = bw.Flush()
	c.Close()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// track registers a listener or a connection (client or upstream) so that
// Close reaches it, adding one to the wait group when wait is set (under
// the lock, so Close never waits on a group that is still growing); it
// reports false once the server is closed.
func (s *Server) track(l net.Listener, c net.Conn, wait bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if l != nil {
		s.listeners[l] = true
	}
	if c != nil {
		s.conns[c] = true
	}
	if wait {
		s.wg.Add(1)
	}
	return true
}

func (s *Server) untrack(l net.Listener, c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.listeners, l)
	if c != nil {
		delete(s.conns, c)
		c.Close()
	}
}
