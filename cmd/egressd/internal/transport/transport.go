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

// Config holds a Transport's settings. Zero values take the defaults noted.
type Config struct {
	HostMap               HostMap          // static host map (-resolve)
	Resolver              Resolver         // default net.DefaultResolver
	RootCAs               *x509.CertPool   // default: system roots
	Forbidden             []netip.AddrPort // egressd's own listeners
	DialTimeout           time.Duration    // default 10 s
	ResponseHeaderTimeout time.Duration    // default 30 s
	IdleConnTimeout       time.Duration    // default 90 s
	MaxIdlePerKey         int              // idle connections kept per (origin, address); default 128 (at least the proxy face's expected concurrency, else connections churn)
	MaxKeys               int              // pooled (origin, address) pairs; default 256
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

// New returns a Transport.
func New(cfg Config) *Transport {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.ResponseHeaderTimeout <= 0 {
		cfg.ResponseHeaderTimeout = 30 * time.Second
	}
	if cfg.IdleConnTimeout <= 0 {
		cfg.IdleConnTimeout = 90 * time.Second
	}
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

// RoundTrip sends req (whose URL's scheme, host and port are origin's)
// over a connection to exactly r.Addr. It never follows redirects: a 3xx
// is returned as it is. req's context bounds the whole exchange (its
// deadline, and its end interrupts it); read the response body to its
// end, then close it, for the connection to be kept. Errors:
// egress.timeout, egress.upstream_error.
func (t *Transport) RoundTrip(req *http.Request, origin string, r Route) (*http.Response, error) {
	return t.RoundTripContext(req.Context(), req, origin, r)
}

// RoundTripContext is RoundTrip with ctx in place of req's context,
// without the copy of req that WithContext makes (a request that goes
// through net/http's Transport is given ctx that way).
func (t *Transport) RoundTripContext(ctx context.Context, req *http.Request, origin string, r Route) (*http.Response, error) {
	resp, err := t.pool(req.URL, origin, r.Addr).roundTrip(ctx, req)
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
	p := t.newPool(u.Scheme == "https", u.Hostname(), addr)
	t.pools[key] = p
	t.order = append(t.order, key)
	return p
}

// Close closes every idle connection and forgets the pools.
func (t *Transport) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.pools {
		p.close()
	}
	t.pools, t.order = map[poolKey]*pool{}, nil
}
