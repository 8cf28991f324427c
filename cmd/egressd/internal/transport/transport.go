package transport

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// Config holds a Transport's settings. A zero timeout takes the default
// noted; a negative one means no limit of its own (the request's context
// still bounds everything).
type Config struct {
	HostMap   HostMap          // static host map (-resolve)
	Resolver  Resolver         // default net.DefaultResolver
	RootCAs   *x509.CertPool   // default: system roots
	Forbidden []netip.AddrPort // egressd's own listeners

	// DialTimeout bounds the TCP connect to the checked address.
	// Default 10 s.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds an https upstream's TLS handshake,
	// counted from the end of the connect. Default 10 s.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout is the longest wait for the response header,
	// counted from the moment the request, body included, is fully
	// written. Default 10 minutes: LLM APIs may think for minutes before
	// their first byte. The body that follows has no limit of its own.
	ResponseHeaderTimeout time.Duration
	// IdleConnTimeout is how long a pooled connection may stay idle
	// before it is closed. Default 90 s.
	IdleConnTimeout time.Duration
	// ExpectContinueTimeout is how long a request that carries
	// "Expect: 100-continue" waits for the upstream's 100 (Continue)
	// before its body is sent anyway (RFC 9110 section 10.1.1); other
	// requests never wait. Default 1 s; negative: the body is sent at
	// once.
	ExpectContinueTimeout time.Duration

	// MaxIdlePerKey is how many idle connections are kept per (origin,
	// checked address). Default 128: at least the proxy face's expected
	// concurrency, else connections churn.
	MaxIdlePerKey int
	// MaxKeys is how many (origin, checked address) pools are kept; the
	// oldest is dropped (its idle connections closed) to make room.
	// Default 256.
	MaxKeys int
	// OnDial, when set, is called from ControlContext with the address of
	// every socket about to connect (tests use it to prove what was dialled).
	OnDial func(netip.AddrPort)
}

// Transport sends requests to checked addresses. Create with New.
type Transport struct {
	cfg      Config
	resolver Resolver
	mu       sync.Mutex
	pools    map[poolKey]*pool
	order    []poolKey
}

// poolKey names one connection pool: a connection made for one checked
// address never serves another.
type poolKey struct {
	origin string
	addr   netip.AddrPort
}

// New returns a Transport with cfg's zero values set to their defaults.
func New(cfg Config) *Transport {
	cfg.DialTimeout = limit(cfg.DialTimeout, 10*time.Second)
	cfg.TLSHandshakeTimeout = limit(cfg.TLSHandshakeTimeout, 10*time.Second)
	cfg.ResponseHeaderTimeout = limit(cfg.ResponseHeaderTimeout, 10*time.Minute)
	cfg.IdleConnTimeout = limit(cfg.IdleConnTimeout, 90*time.Second)
	cfg.ExpectContinueTimeout = limit(cfg.ExpectContinueTimeout, time.Second)
	if cfg.MaxIdlePerKey <= 0 {
		cfg.MaxIdlePerKey = 128
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = 256
	}
	t := &Transport{cfg: cfg, resolver: cfg.Resolver, pools: map[poolKey]*pool{}}
	if t.resolver == nil {
		t.resolver = net.DefaultResolver
	}
	return t
}

// limit returns d, def when d is zero, and zero (net/http's and
// net.Dialer's "no limit") when d is negative.
func limit(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// RoundTrip sends req (whose URL's scheme, host and port are origin's)
// over a connection to exactly r.Addr, with net/http's Transport:
// HTTP/1.1, or HTTP/2 when an https upstream chooses it in ALPN. It never
// follows redirects: a 3xx is returned as it is. The response body
// streams as it arrives, nothing is buffered here. 1xx answers before the
// final one are read past (at most 5, as net/http allows); a 101
// (Switching Protocols) answer to an Upgrade request has a Body that is
// an io.ReadWriteCloser on the connection (RFC 9110 section 7.8). req's
// context bounds the whole exchange, the body's reading included: its end
// closes the connection (HTTP/1.1) or resets the stream (HTTP/2) at once.
// Read the body to its end, then close it, for the connection to be kept.
// Errors: egress.timeout (a timeout of Config, or the context's
// deadline), egress.upstream_error.
func (t *Transport) RoundTrip(req *http.Request, origin string, r Route) (*http.Response, error) {
	return t.RoundTripContext(req.Context(), req, origin, r)
}

// RoundTripContext is RoundTrip with ctx in place of req's context (req
// is copied, as by WithContext, when they differ).
func (t *Transport) RoundTripContext(ctx context.Context, req *http.Request, origin string, r Route) (*http.Response, error) {
	if req.Context() != ctx {
		req = req.WithContext(ctx)
	}
	resp, err := t.pool(req.URL, origin, r.Addr).std.RoundTrip(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
			return nil, wire.Wrap(egressdapi.CodeTimeout, "upstream did not answer in time", err)
		}
		return nil, wire.Wrap(egressdapi.CodeUpstreamError, "upstream request failed", err)
	}
	return resp, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// pool returns the connection pool for (origin, addr); u is the URL of
// the request that needs it (its scheme and host are origin's).
func (t *Transport) pool(u *url.URL, origin string, addr netip.AddrPort) *pool {
	key := poolKey{origin, addr}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pools[key]; p != nil {
		return p
	}
	if len(t.order) >= t.cfg.MaxKeys {
		old := t.order[0]
		t.order = t.order[1:]
		t.pools[old].close()
		delete(t.pools, old)
	}
	p := t.newPool(u.Hostname(), addr)
	t.pools[key] = p
	t.order = append(t.order, key)
	return p
}

// Close closes every idle connection and forgets the pools. Connections
// in use stay open until their exchange ends, then close once idle for
// IdleConnTimeout.
func (t *Transport) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.pools {
		p.close()
	}
	t.pools, t.order = map[poolKey]*pool{}, nil
}
