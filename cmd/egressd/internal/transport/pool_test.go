package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// TestConnectionsReused checks keep-alive: sequential requests share one
// connection, and bodies of every framing (Content-Length, chunked,
// empty) end cleanly; a close-delimited answer is not reused.
func TestConnectionsReused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := plainUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	var dials atomic.Int32
	tr := up.transport(t, Config{OnDial: func(netip.AddrPort) { dials.Add(1) }})
	for _, tc := range []struct{ path, want string }{{"/", "hello"}, {"/chunked", "ab"}, {"/empty", ""}, {"/", "hello"}} {
		body, err := up.get(tr, tc.path)
		is.NoErr(err)
		is.Equal(body, tc.want)
	}
	is.Equal(dials.Load(), int32(1)) // one connection for all
	body, err := up.get(tr, "/close")
	is.NoErr(err)
	is.Equal(body, "bye")
	_, err = up.get(tr, "/")
	is.NoErr(err)
	is.Equal(dials.Load(), int32(2)) // Connection: close was honoured
}

// TestHTTP11OverTLSReused: an HTTPS upstream that speaks only HTTP/1.1
// is verified and kept alive.
func TestHTTP11OverTLSReused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := tlsUpstreamHTTP11(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
	var dials atomic.Int32
	tr := up.transport(t, Config{OnDial: func(netip.AddrPort) { dials.Add(1) }})
	for range 3 {
		body, err := up.get(tr, "/")
		is.NoErr(err)
		is.Equal(body, "HTTP/1.1")
	}
	is.Equal(dials.Load(), int32(1))
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
	up := upstream{origin: srv.URL, addr: netip.MustParseAddrPort(srv.Listener.Addr().String())}
	tr := up.transport(t, Config{})
	for range 3 {
		body, err := up.get(tr, "/")
		is.NoErr(err)
		is.Equal(body, "GET")
		time.Sleep(60 * time.Millisecond)
	}
	// A POST too: it is not retried once written, so it must not meet a
	// dead connection.
	resp, err := up.send(tr, up.request(context.Background(), "POST", "/", []byte("x")))
	is.NoErr(err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.Equal(string(b), "POST")
}

// TestStaleConnectionRetried: a server that drops a kept-alive connection
// right after reading the next request gets the GET again on a new
// connection (net/http's retry of an idempotent request).
func TestStaleConnectionRetried(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var conns atomic.Int32
	up := rawUpstream(t, func(c net.Conn, br *bufio.Reader) {
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
	tr := up.transport(t, Config{})
	for range 2 {
		body, err := up.get(tr, "/")
		is.NoErr(err)
		is.Equal(body, "ok")
	}
	is.Equal(conns.Load(), int32(2))
}

// TestIdleConnectionsEvicted: a connection idle for IdleConnTimeout is
// closed (the upstream sees it go), and the next request dials anew.
func TestIdleConnectionsEvicted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	closed := make(chan struct{}, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	up := upstream{origin: srv.URL, addr: netip.MustParseAddrPort(srv.Listener.Addr().String())}
	var dials atomic.Int32
	tr := up.transport(t, Config{IdleConnTimeout: 100 * time.Millisecond, OnDial: func(netip.AddrPort) { dials.Add(1) }})
	_, err := up.get(tr, "/")
	is.NoErr(err)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
	_, err = up.get(tr, "/")
	is.NoErr(err)
	is.Equal(dials.Load(), int32(2))
}

// TestMaxKeysEvictsOldestPool: with MaxKeys pools, a new (origin,
// address) drops the oldest pool and closes its idle connection; the
// newer pools keep theirs.
func TestMaxKeysEvictsOldestPool(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var mu sync.Mutex
	closedBy := map[string]int{} // server → connections closed
	var dials atomic.Int32
	mk := func(name string) upstream {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				mu.Lock()
				closedBy[name]++
				mu.Unlock()
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return upstream{origin: srv.URL, addr: netip.MustParseAddrPort(srv.Listener.Addr().String())}
	}
	a, b, c := mk("a"), mk("b"), mk("c")
	tr := New(Config{MaxKeys: 2, OnDial: func(netip.AddrPort) { dials.Add(1) }})
	defer tr.Close()
	for _, u := range []upstream{a, b, a, b, c} {
		_, err := u.get(tr, "/")
		is.NoErr(err)
	}
	is.Equal(dials.Load(), int32(3)) // a and b reused their connections
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := closedBy["a"]
		mu.Unlock()
		if n == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	is.Equal(closedBy["a"], 1) // a's pool went, with its idle connection
	is.Equal(closedBy["b"], 0)
	mu.Unlock()
	_, err := b.get(tr, "/")
	is.NoErr(err)
	is.Equal(dials.Load(), int32(3)) // b's pool stayed
	_, err = a.get(tr, "/")
	is.NoErr(err)
	is.Equal(dials.Load(), int32(4)) // a's is made again
}

// TestOddAnswers covers a close-delimited body, an oversized header and
// an answer that never comes.
func TestOddAnswers(t *testing.T) {
	t.Parallel()
	up := rawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		switch req.URL.Path {
		case "/eof":
			io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\nuntil close")
		case "/huge":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 70<<10)+"\r\n\r\n")
		case "/silent":
			br.ReadByte() // until the client goes
		}
	})
	// Only the answer that never comes gets the short header timeout: on
	// a loaded machine a 70 KiB header can take longer than it to read,
	// and the oversized header must be judged as such.
	tr := up.transport(t, Config{ResponseHeaderTimeout: time.Minute})
	short := up.transport(t, Config{ResponseHeaderTimeout: 200 * time.Millisecond})
	for _, tc := range []struct {
		path, want, code string
		tr               *Transport
	}{
		{"/eof", "until close", "", tr},
		{"/huge", "", egressdapi.CodeUpstreamError, tr},
		{"/silent", "", egressdapi.CodeTimeout, short},
	} {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			body, err := up.get(tc.tr, tc.path)
			is.Equal(wire.CodeOf(err), tc.code)
			is.Equal(body, tc.want)
		})
	}
}

// TestContextEndsRequest: the request's context ending interrupts a
// request waiting for its answer, and its deadline is egress.timeout.
func TestContextEndsRequest(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := rawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		http.ReadRequest(br)
		br.ReadByte() // until the client goes
	})
	tr := up.transport(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := up.send(tr, up.request(ctx, "GET", "/", nil))
	is.True(errors.Is(err, context.Canceled))
	is.Equal(wire.CodeOf(err), egressdapi.CodeUpstreamError)
	is.True(time.Since(start) < time.Second)
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = up.send(tr, up.request(ctx, "GET", "/", nil))
	is.Equal(wire.CodeOf(err), egressdapi.CodeTimeout)
}

// TestLargeBodies: an upstream that answers before reading a large body
// (and stops reading) gets its answer back, and large bodies go and come
// back whole otherwise, over HTTP/1.1 and HTTP/2.
func TestLargeBodies(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/early":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		case "/echo":
			io.Copy(w, r.Body)
		default:
			n, _ := io.Copy(io.Discard, r.Body)
			io.WriteString(w, strconv.FormatInt(n, 10))
		}
	})
	body := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			up := p.start(t, h)
			tr := up.transport(t, Config{})
			for _, tc := range []struct {
				path   string
				status int
				want   []byte
			}{
				{"/early", http.StatusRequestEntityTooLarge, nil},
				{"/count", 200, []byte(strconv.Itoa(len(body)))},
				{"/echo", 200, body},
			} {
				is := is.New(t)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				resp, err := up.send(tr, up.request(ctx, "POST", tc.path, body))
				is.NoErr(err) // tc.path
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				cancel()
				is.NoErr(err)                        // tc.path
				is.Equal(resp.Proto, p.name)         // tc.path
				is.Equal(resp.StatusCode, tc.status) // tc.path
				is.True(bytes.Equal(b, tc.want))     // tc.path
			}
		})
	}
}

// TestTLSHandshakeTimeout: an https upstream that accepts the connection
// but never answers the ClientHello is egress.timeout after
// TLSHandshakeTimeout, not after the longer ResponseHeaderTimeout.
func TestTLSHandshakeTimeout(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	silent := rawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		io.Copy(io.Discard, br) // until the client goes
	})
	up := upstream{origin: "https://api.test:" + itoa(silent.addr.Port()), addr: silent.addr}
	tr := up.transport(t, Config{TLSHandshakeTimeout: 200 * time.Millisecond})
	start := time.Now()
	_, err := up.get(tr, "/")
	is.Equal(wire.CodeOf(err), egressdapi.CodeTimeout)
	is.True(time.Since(start) < 5*time.Second)
}
