package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// TestWriteRequestMatchesNetHTTP holds writeRequest to what net/http's
// Request.Write (what http.Transport sent before) writes for the same
// request.
func TestWriteRequestMatchesNetHTTP(t *testing.T) {
	t.Parallel()
	header := http.Header{"Accept": {"a", "b"}, "User-Agent": {" ua/1 ", "second"}, "X-Pad": {" v\t"},
		"Content-Type": {"application/json"}, "Zz": {""}}
	for _, method := range []string{"", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		for _, body := range []string{"", `{"a":1}`} {
			for _, h := range []http.Header{{}, header, {"Content-Type": {"x"}}} {
				for _, closeReq := range []bool{false, true} {
					for _, target := range []string{"/p?q=1", "/a%2Fb/c", "//double", "/"} {
						u := &url.URL{Scheme: "https", Host: "api.test:8443"}
						rec, _ := url.Parse(target)
						u.Path, u.RawPath, u.RawQuery = rec.Path, rec.RawPath, rec.RawQuery
						if strings.HasPrefix(target, "//") {
							u.Opaque = "//api.test:8443" + target
						}
						mk := func() *http.Request {
							r := &http.Request{Method: method, URL: u, Header: h.Clone(), Host: "API.test:8443", Close: closeReq,
								ContentLength: int64(len(body))}
							if body != "" {
								r.Body = io.NopCloser(strings.NewReader(body))
							}
							return r
						}
						is := is.New(t)
						var want, got bytes.Buffer
						is.NoErr(mk().Write(&want))
						r := mk()
						bw := bufio.NewWriter(&got)
						is.NoErr(writeRequest(bw, r, r.Body))
						is.Equal(got.String(), want.String()) // method, body, header, close, target
					}
				}
			}
		}
	}
	// As http.Transport, fields that could split the request are refused.
	is := is.New(t)
	u := &url.URL{Scheme: "http", Host: "a.test", Path: "/"}
	for _, h := range []http.Header{{"X-Nl": {"a\r\nb"}}, {"Bad Name": {"v"}}} {
		err := writeRequest(bufio.NewWriter(io.Discard), &http.Request{Method: "GET", URL: u, Header: h}, nil)
		is.True(err != nil)
	}
}

// get sends GET path to srv through tr and returns the body.
func get(t *testing.T, tr *Transport, srvURL, path string) (string, error) {
	t.Helper()
	u, _ := url.Parse(srvURL + path)
	addr := netip.MustParseAddrPort(u.Host)
	resp, err := tr.RoundTrip(&http.Request{Method: "GET", URL: u, Header: http.Header{}, Host: u.Host}, u.Scheme+"://"+u.Host, Route{Addr: addr})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestConnectionsReused checks keep-alive: sequential requests share one
// connection, and bodies of every framing (Content-Length, chunked,
// empty) end cleanly; a close-delimited answer is not reused.
func TestConnectionsReused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		default:
			io.WriteString(w, "hello")
		}
	}))
	defer srv.Close()
	var dials atomic.Int32
	tr := New(Config{OnDial: func(netip.AddrPort) { dials.Add(1) }})
	defer tr.Close()
	for _, tc := range []struct{ path, want string }{{"/", "hello"}, {"/chunked", "ab"}, {"/empty", ""}, {"/", "hello"}} {
		body, err := get(t, tr, srv.URL, tc.path)
		is.NoErr(err)
		is.Equal(body, tc.want)
	}
	is.Equal(dials.Load(), int32(1)) // one connection for all
	body, err := get(t, tr, srv.URL, "/close")
	is.NoErr(err)
	is.Equal(body, "bye")
	_, err = get(t, tr, srv.URL, "/")
	is.NoErr(err)
	is.Equal(dials.Load(), int32(2)) // Connection: close was honoured
}

// TestIdleConnectionClosedByServer: a server that closes idle connections
// (as servers do after their keep-alive timeout) costs nothing: the next
// request finds the closed connection before using it, or is retried.
func TestIdleConnectionClosedByServer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Method)
	}))
	srv.Config.IdleTimeout = 20 * time.Millisecond
	srv.Start()
	defer srv.Close()
	tr := New(Config{})
	defer tr.Close()
	for range 3 {
		body, err := get(t, tr, srv.URL, "/")
		is.NoErr(err)
		is.Equal(body, "GET")
		time.Sleep(60 * time.Millisecond)
	}
	// A POST too: it is never retried, so it must not meet a dead connection.
	u, _ := url.Parse(srv.URL)
	req := &http.Request{Method: "POST", URL: u, Header: http.Header{}, Host: u.Host, ContentLength: 1, Body: io.NopCloser(strings.NewReader("x"))}
	resp, err := tr.RoundTrip(req, "http://"+u.Host, Route{Addr: netip.MustParseAddrPort(u.Host)})
	is.NoErr(err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.Equal(string(b), "POST")
}

// rawServer answers every connection with fn, for answers net/http's
// server would not give.
func rawServer(t *testing.T, fn func(c net.Conn, br *bufio.Reader)) string {
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
	return "http://" + l.Addr().String()
}

// TestStaleConnectionRetried: a server that drops a kept-alive connection
// right after reading the next request (the race a peek cannot see) gets
// the GET again on a new connection.
func TestStaleConnectionRetried(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var conns atomic.Int32
	srvURL := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		n := conns.Add(1)
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if n == 1 && i == 1 {
				return // the first connection's second request: dropped unanswered
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tr := New(Config{})
	defer tr.Close()
	for range 2 {
		body, err := get(t, tr, srvURL, "/")
		is.NoErr(err)
		is.Equal(body, "ok")
	}
	is.Equal(conns.Load(), int32(2))
}

// TestOddAnswers covers 1xx answers, a close-delimited body, an
// oversized header and an answer that never comes.
func TestOddAnswers(t *testing.T) {
	t.Parallel()
	srvURL := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		switch req.URL.Path {
		case "/1xx":
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody")
		case "/eof":
			io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\nuntil close")
		case "/huge":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 70<<10)+"\r\n\r\n")
		case "/silent":
			time.Sleep(2 * time.Second)
		}
	})
	tr := New(Config{ResponseHeaderTimeout: 200 * time.Millisecond})
	defer tr.Close()
	for _, tc := range []struct {
		path, want, code string
	}{
		{"/1xx", "body", ""},
		{"/eof", "until close", ""},
		{"/huge", "", egressdapi.CodeUpstreamError},
		{"/silent", "", egressdapi.CodeTimeout},
	} {
		is := is.New(t)
		body, err := get(t, tr, srvURL, tc.path)
		is.Equal(wire.CodeOf(err), tc.code) // tc.path
		is.Equal(body, tc.want)
	}
}

// TestContextEndsRequest: the request's context ending interrupts a
// request waiting for its answer, and its deadline is egress.timeout.
func TestContextEndsRequest(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	srvURL := rawServer(t, func(c net.Conn, br *bufio.Reader) {
		http.ReadRequest(br)
		time.Sleep(2 * time.Second)
	})
	tr := New(Config{})
	defer tr.Close()
	u, _ := url.Parse(srvURL + "/")
	addr := netip.MustParseAddrPort(u.Host)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := tr.RoundTrip((&http.Request{Method: "GET", URL: u, Header: http.Header{}, Host: u.Host}).WithContext(ctx), "http://"+u.Host, Route{Addr: addr})
	is.True(errors.Is(err, context.Canceled))
	is.Equal(wire.CodeOf(err), egressdapi.CodeUpstreamError)
	is.True(time.Since(start) < time.Second)
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = tr.RoundTrip((&http.Request{Method: "GET", URL: u, Header: http.Header{}, Host: u.Host}).WithContext(ctx), "http://"+u.Host, Route{Addr: addr})
	is.Equal(wire.CodeOf(err), egressdapi.CodeTimeout)
}

// TestHTTP11OverTLSReused: an HTTPS upstream that speaks only HTTP/1.1
// goes over egressd's own connections, verified and kept alive.
func TestHTTP11OverTLSReused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ca := egresstest.NewCA(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "api.test")}} // HTTP/1.1 only
	srv.StartTLS()
	defer srv.Close()
	var dials atomic.Int32
	tr := New(Config{RootCAs: ca.Pool, OnDial: func(netip.AddrPort) { dials.Add(1) }})
	defer tr.Close()
	addr := netip.MustParseAddrPort(srv.Listener.Addr().String())
	for range 3 {
		u := &url.URL{Scheme: "https", Host: "api.test:" + itoa(addr.Port()), Path: "/"}
		resp, err := tr.RoundTrip(&http.Request{Method: "GET", URL: u, Header: http.Header{}, Host: u.Host}, "https://"+u.Host, Route{Addr: addr})
		is.NoErr(err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		is.Equal(string(b), "HTTP/1.1")
	}
	is.Equal(dials.Load(), int32(1))
}

// TestLargeBodyEarlyAnswer: an upstream that answers before reading a
// large body (and stops reading) gets its answer back, and large bodies
// arrive whole otherwise.
func TestLargeBodyEarlyAnswer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/early" {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		n, _ := io.Copy(io.Discard, r.Body)
		io.WriteString(w, strconv.FormatInt(n, 10))
	}))
	defer srv.Close()
	tr := New(Config{})
	defer tr.Close()
	body := bytes.Repeat([]byte("x"), 8<<20)
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{{"/early", http.StatusRequestEntityTooLarge, ""}, {"/count", 200, strconv.Itoa(len(body))}} {
		u, _ := url.Parse(srv.URL + tc.path)
		req := &http.Request{Method: "POST", URL: u, Header: http.Header{}, Host: u.Host, ContentLength: int64(len(body)),
			Body: io.NopCloser(bytes.NewReader(body)), GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := tr.RoundTrip(req.WithContext(ctx), "http://"+u.Host, Route{Addr: netip.MustParseAddrPort(u.Host)})
		is.NoErr(err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		is.Equal(resp.StatusCode, tc.status)
		is.Equal(string(b), tc.want)
	}
}

// TestAppendHostPortMatchesNetguard: the host map key is spelled as
// netguard.JoinHostPort spells it.
func TestAppendHostPortMatchesNetguard(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for _, h := range []string{"api.test", "127.0.0.1", "[::1]", "::1", "xn--bcher-kva.example"} {
		for _, p := range []uint16{0, 1, 443, 65535} {
			is.Equal(string(appendHostPort(nil, h, p)), netguard.JoinHostPort(h, p))
		}
	}
}

// TestMoveDeadline: deadlines move to clear them, from none, earlier, or
// later by more than the slack; never end up later than asked.
func TestMoveDeadline(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name    string
		cur, to time.Time
		want    bool
	}{
		{"clear", now.Add(time.Minute), time.Time{}, true},
		{"already none", time.Time{}, time.Time{}, false},
		{"from none", time.Time{}, now.Add(time.Minute), true},
		{"earlier", now.Add(time.Minute), now.Add(30 * time.Second), true},
		{"a little later", now.Add(time.Minute), now.Add(time.Minute + 10*time.Millisecond), false},
		{"much later", now.Add(time.Minute), now.Add(2 * time.Minute), true},
		{"short timeout, a little later", now.Add(100 * time.Millisecond), now.Add(120 * time.Millisecond), true},
	} {
		is.New(t).Equal(moveDeadline(tc.cur, tc.to), tc.want) // tc.name
	}
}
