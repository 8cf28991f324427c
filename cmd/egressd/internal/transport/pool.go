package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// maxResponseHeader caps an upstream's status line and header block (and
// an HTTP/2 header list), as net/http's MaxResponseHeaderBytes.
const maxResponseHeader = 64 << 10

// pool is the net/http Transport of one (origin, checked address): every
// connection it makes goes to that address, and, for https, verifies the
// origin's host and resumes TLS sessions only with this pool. One client
// for every request, so that streamed answers, 1xx, 101 (Switching
// Protocols), trailers and HTTP/2 all take the same, well-trodden path.
type pool struct {
	std *http.Transport
}

// newPool returns the pool for connections to want, for an origin whose
// host is host.
func (t *Transport) newPool(host string, want netip.AddrPort) *pool {
	dialer := &net.Dialer{
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
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetHTTP2(true) // over TLS, as the upstream chooses in ALPN
	std := &http.Transport{
		Proxy: nil, // never a proxy from the environment
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", want.String())
		},
		// Only https URLs use it. Sessions are resumed only within this
		// pool (one origin, one checked address), after a fully verified
		// handshake; net/http adds h2 and http/1.1 to NextProtos.
		TLSClientConfig: &tls.Config{RootCAs: t.cfg.RootCAs, MinVersion: tls.VersionTLS12, ServerName: host,
			ClientSessionCache: tls.NewLRUClientSessionCache(64)},
		Protocols:              &protos,
		DisableCompression:     true, // the pipeline decides Accept-Encoding
		MaxIdleConnsPerHost:    t.cfg.MaxIdlePerKey,
		IdleConnTimeout:        t.cfg.IdleConnTimeout,
		TLSHandshakeTimeout:    t.cfg.TLSHandshakeTimeout,
		ResponseHeaderTimeout:  t.cfg.ResponseHeaderTimeout,
		ExpectContinueTimeout:  t.cfg.ExpectContinueTimeout,
		MaxResponseHeaderBytes: maxResponseHeader,
	}
	return &pool{std: std}
}

// close closes the pool's idle connections; connections in use close
// once their exchange ends and they have been idle for IdleConnTimeout.
func (p *pool) close() { p.std.CloseIdleConnections() }
