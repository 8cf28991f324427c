package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"testing"

	"hostkit.dev/cmd/egressd/internal/egresstest"
)

// upstream is a loopback test server as the transport sees it: the
// origin requests name (https ones name api.test, which only the route
// ties to the server) and the address it listens on.
type upstream struct {
	origin string         // scheme://host:port
	addr   netip.AddrPort // the checked address
	roots  *egresstest.CA // https: the CA its certificate is from
}

// plainUpstream serves h over HTTP/1.1 without TLS.
func plainUpstream(t *testing.T, h http.Handler) upstream {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	addr := netip.MustParseAddrPort(s.Listener.Addr().String())
	return upstream{origin: s.URL, addr: addr}
}

// tlsUpstream serves h over TLS for api.test, speaking HTTP/2 or
// HTTP/1.1 as the client chooses in ALPN.
func tlsUpstream(t *testing.T, h http.Handler) upstream {
	t.Helper()
	ca := egresstest.NewCA(t)
	s := ca.TLSServer(t, h, "api.test")
	addr := netip.MustParseAddrPort(s.Listener.Addr().String())
	return upstream{origin: "https://api.test:" + itoa(addr.Port()), addr: addr, roots: ca}
}

// tlsUpstreamHTTP11 serves h over TLS for api.test, offering only
// HTTP/1.1.
func tlsUpstreamHTTP11(t *testing.T, h http.Handler) upstream {
	t.Helper()
	ca := egresstest.NewCA(t)
	s := httptest.NewUnstartedServer(h)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "api.test")}}
	s.StartTLS()
	t.Cleanup(s.Close)
	addr := netip.MustParseAddrPort(s.Listener.Addr().String())
	return upstream{origin: "https://api.test:" + itoa(addr.Port()), addr: addr, roots: ca}
}

// rawUpstream answers every connection with fn, for answers net/http's
// server would not give; it listens on 127.0.0.1 and speaks plain HTTP.
func rawUpstream(t *testing.T, fn func(c net.Conn, br *bufio.Reader)) upstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				fn(c, bufio.NewReader(c))
			})
		}
	})
	return upstream{origin: "http://" + l.Addr().String(), addr: netip.MustParseAddrPort(l.Addr().String())}
}

// transport returns a Transport that trusts u's CA, with cfg's other
// settings; it is closed at the end of the test.
func (u upstream) transport(t *testing.T, cfg Config) *Transport {
	t.Helper()
	if u.roots != nil {
		cfg.RootCAs = u.roots.Pool
	}
	tr := New(cfg)
	t.Cleanup(tr.Close)
	return tr
}

// request returns a request for path at u, with body (nil: none) and a
// GetBody that gives it again, as the pipeline builds them.
func (u upstream) request(ctx context.Context, method, path string, body []byte) *http.Request {
	target, _ := url.Parse(u.origin + path)
	req := &http.Request{Method: method, URL: target, Header: http.Header{}, Host: target.Host, ContentLength: int64(len(body))}
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return req.WithContext(ctx)
}

// send sends req to u through tr.
func (u upstream) send(tr *Transport, req *http.Request) (*http.Response, error) {
	return tr.RoundTrip(req, u.origin, Route{Addr: u.addr})
}

// get sends GET path to u through tr and returns the body.
func (u upstream) get(tr *Transport, path string) (string, error) {
	resp, err := u.send(tr, u.request(context.Background(), "GET", path, nil))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func itoa(p uint16) string {
	return netip.AddrPortFrom(netip.IPv4Unspecified(), p).String()[len("0.0.0.0:"):]
}
