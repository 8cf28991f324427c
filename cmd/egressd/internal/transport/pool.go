package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// pool holds the connections of one (origin, checked address). Requests
// go over its own HTTP/1.1 connections (conn.go): the calling goroutine
// writes the request and reads the response itself, where net/http's
// Transport hands each request to a writer and a reader goroutine per
// connection (two wake-ups and a channel round trip per request, ~15 % of
// egressd's CPU per proxied request in bench/proxy). Two kinds of request
// take a net/http Transport (std) instead, dialled the same way: every
// request once the upstream chose HTTP/2 in ALPN (h2), and a request
// whose body exceeds maxInlineBody, so that an upstream answering before
// it has read the body (and no longer reading) gets its answer through,
// as net/http reads while it writes.
type pool struct {
	t      *Transport
	addr   netip.AddrPort
	https  bool
	tlsCfg *tls.Config // https only: ServerName is the origin's host
	dialer *net.Dialer

	mu     sync.Mutex
	idle   []*conn // most recently used last
	std    *http.Transport
	h2     bool // the upstream chose h2: every request goes through std
	closed bool
	reaper *time.Timer
}

// maxInlineBody is the largest request body sent over the pool's own
// connections; larger ones go through std.
const maxInlineBody = 64 << 10

// errUseH2 reports that the upstream chose HTTP/2: the request goes
// through the pool's net/http Transport instead.
var errUseH2 = errors.New("transport: upstream negotiated h2")

// errPoolClosed is the error of a request whose pool was evicted or
// closed while it dialled.
var errPoolClosed = errors.New("transport: connection pool closed")

func (t *Transport) newPool(https bool, host string, want netip.AddrPort) *pool {
	p := &pool{t: t, addr: want, https: https}
	p.dialer = &net.Dialer{
		Timeout:   t.cfg.DialTimeout,
		KeepAlive: 30 * time.Second,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			got, err := netip.ParseAddrPort(address)
			if err != nil || got != want {
				return fmt.Errorf("transport: refusing to connect to %s, checked %s", address, want)
			}
			if t.cfg.OnDial != nil {
				t.cfg.OnDial(got)
			}
			return nil
		},
	}
	if https {
		// TLS sessions are resumed only within this pool (one origin,
		// one checked address), after a fully verified handshake.
		p.tlsCfg = &tls.Config{RootCAs: t.cfg.RootCAs, MinVersion: tls.VersionTLS12, ServerName: host,
			ClientSessionCache: tls.NewLRUClientSessionCache(64), NextProtos: []string{"h2", "http/1.1"}}
	}
	return p
}

// roundTrip sends req over an idle connection or a new one. A request that
// failed on a reused connection before any answer arrived is sent once
// more on a new connection when net/http would retry it (retryable).
func (p *pool) roundTrip(ctx context.Context, req *http.Request) (*http.Response, error) {
	withCtx := func() *http.Request { // for net/http, which reads req's context
		if req.Context() == ctx {
			return req
		}
		return req.WithContext(ctx)
	}
	if req.ContentLength > maxInlineBody {
		return p.stdTransport().RoundTrip(withCtx())
	}
	for attempt := 0; ; attempt++ {
		if std := p.http2(); std != nil {
			return std.RoundTrip(withCtx())
		}
		c, err := p.get(ctx)
		if errors.Is(err, errUseH2) {
			if std := p.http2(); std != nil {
				return std.RoundTrip(withCtx())
			}
			return nil, errPoolClosed
		}
		if err != nil {
			return nil, err
		}
		body := req.Body
		if attempt > 0 && req.GetBody != nil && body != nil && body != http.NoBody {
			if body, err = req.GetBody(); err != nil { // the first attempt read req.Body
				c.close()
				return nil, err
			}
		}
		resp, err := c.roundTrip(ctx, req, body)
		if err == nil {
			return resp, nil
		}
		c.close()
		if attempt == 0 && c.reused && ctx.Err() == nil && retryable(req, err) {
			continue
		}
		return nil, unwrapAttempt(err)
	}
}

// http2 returns std once the upstream chose h2, else nil.
func (p *pool) http2() *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.h2 {
		return nil
	}
	return p.std
}

// useH2 sends every later request of the pool through std.
func (p *pool) useH2() {
	std := p.stdTransport()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && std != nil {
		p.h2 = true
	}
}

// stdTransport returns the pool's net/http Transport, made on first use:
// it dials the same checked address with the same TLS settings (and
// session cache), speaks HTTP/2 or HTTP/1.1 as the upstream chooses, and
// has the limits the pool's own connections have.
func (p *pool) stdTransport() *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.std != nil {
		return p.std
	}
	var cfg *tls.Config
	if p.tlsCfg != nil {
		cfg = p.tlsCfg.Clone()
		cfg.NextProtos = nil // the Transport sets h2 and http/1.1 itself
	}
	p.std = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return p.dialer.DialContext(ctx, "tcp", p.addr.String())
		},
		TLSClientConfig:        cfg,
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
		MaxIdleConnsPerHost:    p.t.cfg.MaxIdlePerKey,
		IdleConnTimeout:        p.t.cfg.IdleConnTimeout,
		ResponseHeaderTimeout:  p.t.cfg.ResponseHeaderTimeout,
		TLSHandshakeTimeout:    p.t.cfg.DialTimeout,
		MaxResponseHeaderBytes: maxResponseHeader,
	}
	return p.std
}

// get returns an idle connection that is still open, or dials one.
func (p *pool) get(ctx context.Context) (*conn, error) {
	for {
		p.mu.Lock()
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			return p.dial(ctx)
		}
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if time.Since(c.idleAt) < p.t.cfg.IdleConnTimeout && c.alive() {
			c.reused = true
			return c, nil
		}
		c.close()
	}
}

// dial connects to exactly the checked address and, for https, completes
// a verified TLS handshake within DialTimeout.
func (p *pool) dial(ctx context.Context) (*conn, error) {
	nc, err := p.dialer.DialContext(ctx, "tcp", p.addr.String())
	if err != nil {
		return nil, err
	}
	tcp, _ := nc.(*net.TCPConn)
	if !p.https {
		return newConn(p, nc, tcp), nil
	}
	hctx, cancel := context.WithTimeout(ctx, p.t.cfg.DialTimeout)
	defer cancel()
	tc := tls.Client(nc, p.tlsCfg)
	if err := tc.HandshakeContext(hctx); err != nil {
		nc.Close()
		return nil, err
	}
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		tc.Close()
		p.useH2()
		return nil, errUseH2
	}
	return newConn(p, tc, tcp), nil
}

// put returns a connection whose last answer was read completely to the
// idle list, or closes it when the pool is closed or full.
func (p *pool) put(c *conn) {
	c.idleAt = time.Now()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.t.cfg.MaxIdlePerKey {
		p.mu.Unlock()
		c.close()
		return
	}
	p.idle = append(p.idle, c)
	if p.reaper == nil {
		p.reaper = time.AfterFunc(p.t.cfg.IdleConnTimeout, p.reap)
	}
	p.mu.Unlock()
}

// reap closes connections idle for IdleConnTimeout, and runs again while
// any stay idle.
func (p *pool) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reaper = nil
	n := 0
	for n < len(p.idle) && time.Since(p.idle[n].idleAt) >= p.t.cfg.IdleConnTimeout {
		p.idle[n].close()
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	if len(p.idle) > 0 && !p.closed {
		p.reaper = time.AfterFunc(p.t.cfg.IdleConnTimeout-time.Since(p.idle[0].idleAt), p.reap)
	}
}

// close closes every idle connection; connections in use are closed when
// they come back.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.idle {
		c.close()
	}
	p.idle = nil
	if p.reaper != nil {
		p.reaper.Stop()
		p.reaper = nil
	}
	if p.std != nil {
		p.std.CloseIdleConnections()
	}
}
