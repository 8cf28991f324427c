package transport

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// protocols are the two ways an exchange goes: HTTP/1.1 in the clear, and
// HTTP/2 over TLS (chosen in ALPN).
var protocols = []struct {
	name  string
	start func(*testing.T, http.Handler) upstream
}{{"HTTP/1.1", plainUpstream}, {"HTTP/2.0", tlsUpstream}}

// TestBodyStreams: each piece of an answer reaches the caller while the
// upstream is still waiting to send the next (nothing buffers the body),
// and trailers arrive after it.
func TestBodyStreams(t *testing.T) {
	t.Parallel()
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			next := make(chan struct{})
			up := p.start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Trailer", "X-Events")
				for _, ev := range []string{"one", "two", "three"} {
					io.WriteString(w, "data: "+ev+"\n\n")
					w.(http.Flusher).Flush()
					select {
					case <-next: // the client has read it
					case <-r.Context().Done():
						return
					}
				}
				w.Header().Set("X-Events", "3")
			}))
			tr := up.transport(t, Config{})
			resp, err := up.send(tr, up.request(context.Background(), "GET", "/events", nil))
			is.NoErr(err)
			defer resp.Body.Close()
			is.Equal(resp.Proto, p.name)
			br := bufio.NewReader(resp.Body)
			for _, ev := range []string{"one", "two", "three"} {
				line, err := br.ReadString('\n')
				is.NoErr(err)
				is.Equal(line, "data: "+ev+"\n")
				br.ReadString('\n') // the blank line
				next <- struct{}{}
			}
			rest, err := io.ReadAll(br)
			is.NoErr(err)
			is.Equal(len(rest), 0)
			is.Equal(resp.Trailer.Get("X-Events"), "3")
		})
	}
}

// TestCancelEndsBodyRead: a client that goes away (the request's context
// ends) while an upstream is sending a body slowly ends the upstream
// request within a second: the HTTP/1.1 upstream sees its connection
// closed, the HTTP/2 one its stream reset; and the blocked body read
// returns at once.
func TestCancelEndsBodyRead(t *testing.T) {
	t.Parallel()
	const within = time.Second
	type start func(t *testing.T, gone chan<- time.Time) upstream
	for _, tc := range []struct {
		name  string
		start start
	}{
		{"HTTP/1.1", func(t *testing.T, gone chan<- time.Time) upstream {
			return rawUpstream(t, func(c net.Conn, br *bufio.Reader) {
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
				go func() { // a byte every 20 ms, until the connection fails
					for {
						if _, err := io.WriteString(c, "1\r\nx\r\n"); err != nil {
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
				}()
				br.ReadByte() // EOF: the client closed the connection
				gone <- time.Now()
			})
		}},
		{"HTTP/2.0", func(t *testing.T, gone chan<- time.Time) upstream {
			return tlsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for {
					io.WriteString(w, "x")
					w.(http.Flusher).Flush()
					select {
					case <-r.Context().Done(): // the stream was reset
						gone <- time.Now()
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			gone := make(chan time.Time, 1)
			up := tc.start(t, gone)
			tr := up.transport(t, Config{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			resp, err := up.send(tr, up.request(ctx, "GET", "/slow", nil))
			is.NoErr(err)
			defer resp.Body.Close()
			is.Equal(resp.Proto, tc.name)
			_, err = io.ReadFull(resp.Body, make([]byte, 3)) // it is streaming
			is.NoErr(err)
			readErr := make(chan error, 1)
			go func() {
				_, err := io.Copy(io.Discard, resp.Body)
				readErr <- err
			}()
			time.Sleep(50 * time.Millisecond)
			canceled := time.Now()
			cancel()
			select {
			case err := <-readErr:
				is.True(err != nil) // the read ends in an error, not a clean EOF
				is.True(time.Since(canceled) < within)
			case <-time.After(within):
				t.Fatal("the body read did not end within a second of the cancel")
			}
			select {
			case at := <-gone:
				is.True(at.Sub(canceled) < within)
			case <-time.After(within):
				t.Fatal("the upstream did not see the request end within a second of the cancel")
			}
		})
	}
}

// TestResponseHeaderTimeout: an upstream whose header comes later than
// ResponseHeaderTimeout after the request is egress.timeout; one that
// answers a little sooner is served.
func TestResponseHeaderTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 5 * time.Second
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("after"))
		select {
		case <-time.After(d):
			io.WriteString(w, "ok")
		case <-r.Context().Done():
		}
	})
	for _, p := range protocols {
		for _, tc := range []struct {
			after, want, code string
		}{
			{"400ms", "ok", ""},
			{"60s", "", egressdapi.CodeTimeout},
		} {
			t.Run(p.name+"/"+tc.after, func(t *testing.T) {
				t.Parallel()
				is := is.New(t)
				up := p.start(t, h)
				tr := up.transport(t, Config{ResponseHeaderTimeout: timeout})
				start := time.Now()
				body, err := up.get(tr, "/?after="+tc.after)
				is.Equal(wire.CodeOf(err), tc.code)
				is.Equal(body, tc.want)
				if tc.code != "" {
					// Not the upstream's delay; generous, as a loaded
					// machine can take seconds to run the test again.
					is.True(time.Since(start) < 30*time.Second)
				}
			})
		}
	}
}

// TestInformational: 1xx answers (103 Early Hints, an unasked-for 100
// Continue) before the final one are read past, and the final answer
// arrives, over HTTP/1.1 and HTTP/2.
func TestInformational(t *testing.T) {
	t.Parallel()
	raw := rawUpstream(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"+
			"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"+
			"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nLink: </style.css>; rel=preload\r\n\r\nfinal")
	})
	h2 := tlsUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "final")
	}))
	for _, tc := range []struct {
		name string
		up   upstream
	}{{"HTTP/1.1", raw}, {"HTTP/2.0", h2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			tr := tc.up.transport(t, Config{})
			resp, err := tc.up.send(tr, tc.up.request(context.Background(), "GET", "/", nil))
			is.NoErr(err)
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			is.NoErr(err)
			is.Equal(resp.StatusCode, http.StatusOK)
			is.Equal(resp.Proto, tc.name)
			is.Equal(string(b), "final")
			is.Equal(resp.Header.Get("Link"), "</style.css>; rel=preload")
		})
	}
}

// TestSwitchingProtocols: a 101 (Switching Protocols) answer to an
// "Upgrade: websocket" request comes back with a Body that is an
// io.ReadWriteCloser on the connection, in both directions; over https
// the upgrade goes over HTTP/1.1 even to an upstream that offers HTTP/2.
func TestSwitchingProtocols(t *testing.T) {
	t.Parallel()
	// echo takes a hijacked or raw connection past the 101.
	echo := func(c net.Conn, br *bufio.Reader) {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		buf := make([]byte, 64)
		for {
			n, err := br.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write([]byte(strings.ToUpper(string(buf[:n])))); err != nil {
				return
			}
		}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 || !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			http.Error(w, "upgrade over HTTP/1.1 only", http.StatusBadRequest)
			return
		}
		c, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		echo(c, rw.Reader)
	})
	for _, tc := range []struct {
		name  string
		start func(*testing.T, http.Handler) upstream
	}{{"http", plainUpstream}, {"https offering h2", tlsUpstream}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			up := tc.start(t, h)
			tr := up.transport(t, Config{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req := up.request(ctx, "GET", "/ws", nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			resp, err := up.send(tr, req)
			is.NoErr(err)
			defer resp.Body.Close()
			is.Equal(resp.StatusCode, http.StatusSwitchingProtocols)
			rwc, ok := resp.Body.(io.ReadWriteCloser)
			is.True(ok) // the body is the connection
			for _, msg := range []string{"ping", "again"} {
				_, err = io.WriteString(rwc, msg)
				is.NoErr(err)
				got := make([]byte, len(msg))
				_, err = io.ReadFull(rwc, got)
				is.NoErr(err)
				is.Equal(string(got), strings.ToUpper(msg))
			}
		})
	}
}

// TestExpectContinue: a request with "Expect: 100-continue" sends its
// body once the upstream says 100 (Continue), without waiting out
// ExpectContinueTimeout; one whose upstream refuses gets the refusal and
// no body is sent.
func TestExpectContinue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	got := make(chan string, 1)
	up := plainUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			http.Error(w, "no", http.StatusExpectationFailed)
			return
		}
		b, _ := io.ReadAll(r.Body) // net/http's server sends the 100 here
		got <- string(b)
	}))
	tr := up.transport(t, Config{ExpectContinueTimeout: 5 * time.Second})
	req := up.request(context.Background(), "PUT", "/", []byte("payload"))
	req.Header.Set("Expect", "100-continue")
	start := time.Now()
	resp, err := up.send(tr, req)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusOK)
	is.Equal(<-got, "payload")
	is.True(time.Since(start) < 4*time.Second) // the 100 came first
	req = up.request(context.Background(), "PUT", "/refuse", []byte("payload"))
	req.Header.Set("Expect", "100-continue")
	resp, err = up.send(tr, req)
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusExpectationFailed)
}
