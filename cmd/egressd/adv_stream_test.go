//go:build linux

package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/wsframe"
	"hostkit.dev/lib/api/egressdapi"
)

// Adversarial tests of the streaming surface (WebSocket, HTTP/2, streamed
// answers). Tests that found a defect that is not fixed yet live in
// adv_stream_fail_test.go (build tag advfail).

// TestAdvWSValueAcrossFragments: an upstream message that carries the
// key split over many fragments, with a ping between two of them, reaches
// the client scrubbed.
func TestAdvWSValueAcrossFragments(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) {
		msg := "key=" + canary + "!"
		for i := 0; i < len(msg); i++ {
			op := byte(wsframe.OpContinuation)
			if i == 0 {
				op = wsframe.OpText
			}
			p.send(i == len(msg)-1, op, []byte{msg[i]})
			if i == 6 {
				p.send(true, wsframe.OpPing, []byte("x"))
			}
		}
		p.send(true, wsframe.OpClose, wsframe.ClosePayload(1000, ""))
		time.Sleep(200 * time.Millisecond)
	})
	c := a.dialWS(t, "/ws")
	got, _ := c.recvAll(5 * time.Second)
	checkNoCanary(t, got)
	is.True(strings.Contains(got, "[REDACTED]"))
}

// TestAdvWSHugeFrameClaim: a client frame that claims 2^62 bytes is
// refused at once (1009), before anything is allocated or forwarded; an
// upstream frame that claims as much and sends a little is relayed
// piece by piece and the relay ends when the upstream goes away.
func TestAdvWSHugeFrameClaim(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) {
		p.recvAll(3 * time.Second)
	})
	c := a.dialWS(t, "/ws")
	hdr := []byte{0x82, 0xFF, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}
	_, err := c.c.Write(hdr)
	is.NoErr(err)
	_, code := c.recvAll(5 * time.Second)
	is.Equal(code, uint16(wsframe.CloseTooBig))
	is.True(waitAudit(t, a.eg, `"ended_by":"message_cap"`))
}

// TestAdvWS101HeaderEcho: the key in a 101 answer's header fields is
// scrubbed.
func TestAdvWS101HeaderEcho(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWSHead(t, "X-Echo: k="+canary+"\r\nSec-WebSocket-Protocol: "+canary+"\r\n", func(p *wsPeer) { p.recvAll(2 * time.Second) })
	c := a.dialWS(t, "/ws")
	checkNoCanary(t, c.head)
	is.True(strings.Contains(c.head, "[REDACTED]"))
}

// TestAdvWSEchoAfterBundleDrop (leak, high; fixed): a WebSocket relay
// used to outlive its bundle. Once the bundle is dropped its values are
// unregistered from the scrubber, and every later upstream message got a
// fresh scrubber without them: an upstream (the credential's
// destination, which received the key in the handshake) that echoed the
// key after the drop sent it to the client raw. The relay now ends with
// the bundle (ended_by bundle.drop), as an opaque tunnel does.
func TestAdvWSEchoAfterBundleDrop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) {
		for {
			h, _, err := p.recv()
			if err != nil || h.Opcode == wsframe.OpClose {
				return
			}
			p.send(true, wsframe.OpText, []byte("key="+canary))
		}
	})
	c := a.dialWS(t, "/ws")
	is.NoErr(c.send(true, wsframe.OpText, []byte("hello")))
	first, _ := c.recvMessage(t)
	is.Equal(first, "key=[REDACTED]")
	err := a.eg.api.BundleDrop(context.Background(), "inv-s")
	is.NoErr(err)
	c.send(true, wsframe.OpText, []byte("again"))
	got, _ := c.recvAll(3 * time.Second)
	is.True(!strings.Contains(got, canary)) // the raw key after the drop
	is.True(waitAudit(t, a.eg, `"ended_by":"bundle.drop"`))
}

// TestAdvStreamTrailerAfterDrop (leak, high; fixed): a streamed body is
// scrubbed by a snapshot taken when its header arrived, but its trailer
// fields are sanitized with the live scrubber: once the bundle was
// dropped (its values unregistered) mid-stream, the upstream's trailer
// carried the key to the client raw. Such an answer now ends without its
// trailer, cut off (never a clean end).
func TestAdvStreamTrailerAfterDrop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	release := make(chan struct{})
	ca := egresstest.NewCA(t)
	f := &llmFixture{ended: map[string]time.Time{}, auth: map[string]string{}}
	srv := ca.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		<-release
		w.Header().Set("X-Sum", canary)
	}), "llm.test")
	f.setup(t, ca, startEgressd, "llm.test", strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port))
	resp, err := f.get(t, f.client(t), "/t")
	is.NoErr(err)
	defer resp.Body.Close()
	b := make([]byte, 4)
	_, err = io.ReadFull(resp.Body, b)
	is.NoErr(err)
	is.NoErr(f.eg.api.BundleDrop(ctx, "inv-s"))
	close(release)
	io.ReadAll(resp.Body)
	is.True(!strings.Contains(resp.Trailer.Get("X-Sum"), canary)) // the raw key in the trailer
}

// TestAdvWSTotalTimeout (resource, medium; fixed): -total-timeout bounds
// "a whole exchange", but a WebSocket relay never looked at it: a busy
// connection lived on past it for as long as frames moved. The relay now
// ends with the exchange (1001, ended_by total_timeout).
func TestAdvWSTotalTimeout(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) {
		for {
			h, b, err := p.recv()
			if err != nil || h.Opcode == wsframe.OpClose {
				return
			}
			p.send(true, wsframe.OpText, b)
		}
	}, "-total-timeout", "2s")
	c := a.dialWS(t, "/ws")
	start := time.Now()
	alive := true
	for time.Since(start) < 5*time.Second && alive {
		if c.send(true, wsframe.OpText, []byte("ping")) != nil {
			break
		}
		c.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		h, _, err := c.recv()
		alive = err == nil && h.Opcode != wsframe.OpClose
		time.Sleep(250 * time.Millisecond)
	}
	is.True(time.Since(start) < 4*time.Second) // still relaying well past -total-timeout 2s
	is.True(waitAudit(t, a.eg, `"ended_by":"total_timeout"`))
}

// TestAdvWSAuditEndedBy (audit, low; fixed): the exchange's idle timer,
// started when the 101 arrived, was never fed by the relay, so a
// WebSocket connection busy for longer than -idle-timeout and then closed
// normally was recorded as ended_by idle_timeout. The relay keeps its own
// idle watch; the exchange's timer is no longer started for it.
func TestAdvWSAuditEndedBy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) {
		for {
			h, b, err := p.recv()
			if err != nil {
				return
			}
			if h.Opcode == wsframe.OpClose {
				p.send(true, wsframe.OpClose, b)
				return
			}
			p.send(true, wsframe.OpText, b)
		}
	}, "-idle-timeout", streamIdle.String())
	c := a.dialWS(t, "/ws")
	for start := time.Now(); time.Since(start) < streamIdle+time.Second; time.Sleep(250 * time.Millisecond) {
		is.NoErr(c.send(true, wsframe.OpText, []byte("busy")))
		_, _, err := c.recv()
		is.NoErr(err)
	}
	c.send(true, wsframe.OpClose, wsframe.ClosePayload(1000, ""))
	c.recvAll(2 * time.Second)
	c.c.Close()
	is.True(waitAudit(t, a.eg, `"ended_by":"closed"`))
	is.True(!strings.Contains(a.eg.auditLog(t), `"ended_by":"idle_timeout"`))
}

// TestAdvWSShutdown: egressd stopping mid-relay ends the WebSocket
// connection (closed, or 1001) and writes the after record before it
// exits.
func TestAdvWSShutdown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) { p.recvAll(10 * time.Second) })
	c := a.dialWS(t, "/ws")
	is.NoErr(c.send(true, wsframe.OpText, []byte("hello")))
	time.Sleep(100 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- a.eg.stop() }()
	_, code := c.recvAll(5 * time.Second)
	is.True(code == 0 || code == wsframe.CloseGoingAway)
	select {
	case err := <-done:
		is.NoErr(err)
	case <-time.After(10 * time.Second):
		t.Fatal("egressd did not stop with a WebSocket relay open")
	}
	is.True(strings.Contains(a.eg.auditLog(t), `"status":101`)) // the after record
}

// TestAdvH2ClientNeverReads (resource/audit, medium; fixed): an HTTP/2
// client inside an intercepted tunnel that opens a stream and never
// grants it flow-control window held the stream's handler forever:
// streamH2 blocked in Flush with no write deadline (the HTTP/1.1 path has
// -idle-timeout), the exchange's idle timer only cancelled the upstream,
// and the after record was never written while the client kept its
// connection open. Each piece now has -idle-timeout to be written.
func TestAdvH2ClientNeverReads(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t, "-idle-timeout", streamIdle.String())
	host := strings.TrimPrefix(f.url, "https://")
	c, err := net.Dial("tcp", f.info.ProxyAddress)
	is.NoErr(err)
	defer c.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("inv-s:" + f.tok))
	io.WriteString(c, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\nProxy-Authorization: Basic "+auth+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	is.NoErr(err)
	is.Equal(resp.StatusCode, 200)
	tc := tls.Client(c, &tls.Config{RootCAs: f.roots(t), ServerName: "llm.test", NextProtos: []string{"h2"}})
	is.NoErr(tc.Handshake())
	is.Equal(tc.ConnectionState().NegotiatedProtocol, "h2")
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	is.NoErr(fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", host},
		{":path", "/sse?n=2000&gap=10ms"}, {"authorization", "Bearer " + f.ph}} {
		enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	is.NoErr(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}))
	go func() { // read (and ack settings), never a WINDOW_UPDATE
		for {
			fm, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := fm.(*http2.SettingsFrame); ok && !s.IsAck() {
				fr.WriteSettingsAck()
			}
		}
	}()
	// The upstream is cut after -idle-timeout (2 s) of no progress; the
	// exchange must then end and be recorded.
	deadline := time.Now().Add(3*streamIdle + 2*time.Second)
	for time.Now().Before(deadline) && !strings.Contains(f.eg.auditLog(t), `"status":200`) {
		time.Sleep(100 * time.Millisecond)
	}
	is.True(strings.Contains(f.eg.auditLog(t), `"status":200`)) // no after record: the exchange never ended
}

// TestAdvWSUpstreamNeverReads (hang/resource, high; fixed): an upstream
// that accepts the handshake and then reads nothing, while the client
// sends more than the socket buffers hold, left the client-side relay
// blocked in its write to the upstream, holding the write lock. The
// idle watch then ended the relay, but end waited for that lock to send
// the upstream its close frame, so the upstream was never closed, the
// write never failed, the message's buffer budget was never given back
// and the after record never written: the relay hung for as long as the
// upstream kept its connection, even after the client left.
func TestAdvWSUpstreamNeverReads(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) { time.Sleep(30 * time.Second) }, "-idle-timeout", streamIdle.String())
	c := a.dialWS(t, "/ws")
	big := make([]byte, 8<<20)
	go func() {
		for range 4 {
			if c.send(true, wsframe.OpBinary, big) != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(3*streamIdle + 3*time.Second)
	for time.Now().Before(deadline) && !strings.Contains(a.eg.auditLog(t), `"status":101`) {
		time.Sleep(100 * time.Millisecond)
	}
	is.True(strings.Contains(a.eg.auditLog(t), `"status":101`)) // no after record: the relay hangs
}

// TestAdvH2Smuggling: HTTP/2 streams inside an intercepted tunnel that
// try to reach another host or to frame a request two ways never reach
// the upstream: an :authority of another host (421), a Host field that
// differs from the :authority, a Content-Length the DATA frames do not
// match, and connection-specific fields (RFC 9113 section 8.2.2).
func TestAdvH2Smuggling(t *testing.T) {
	t.Parallel()
	f := newLLMFixture(t)
	key := "Bearer " + "PH"
	for i, tc := range []struct {
		name   string
		fields func(host, path string) []string
		data   string // sent in one DATA frame with END_STREAM, when not ""
	}{
		{"authority other host", func(host, path string) []string {
			return []string{":method", "GET", ":scheme", "https", ":authority", "evil.test", ":path", path, "authorization", key}
		}, ""},
		{"authority other port", func(host, path string) []string {
			return []string{":method", "GET", ":scheme", "https", ":authority", "llm.test:1", ":path", path, "authorization", key}
		}, ""},
		{"host field differs", func(host, path string) []string {
			return []string{":method", "GET", ":scheme", "https", ":authority", host, ":path", path, "host", "evil.test", "authorization", key}
		}, ""},
		{"no authority, host other", func(host, path string) []string {
			return []string{":method", "GET", ":scheme", "https", ":path", path, "host", "evil.test", "authorization", key}
		}, ""},
		{"content-length above data", func(host, path string) []string {
			return []string{":method", "POST", ":scheme", "https", ":authority", host, ":path", path, "content-length", "50", "authorization", key}
		}, "short"},
		{"content-length below data", func(host, path string) []string {
			return []string{":method", "POST", ":scheme", "https", ":authority", host, ":path", path, "content-length", "2", "authorization", key}
		}, "longer than two"},
		{"transfer-encoding", func(host, path string) []string {
			return []string{":method", "POST", ":scheme", "https", ":authority", host, ":path", path, "transfer-encoding", "chunked", "authorization", key}
		}, "5\r\nhello\r\n0\r\n\r\n"},
		{"connection field", func(host, path string) []string {
			return []string{":method", "GET", ":scheme", "https", ":authority", host, ":path", path, "connection", "keep-alive", "authorization", key}
		}, ""},
		{"CONNECT method", func(host, path string) []string {
			return []string{":method", "CONNECT", ":authority", "evil.test:443"}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			fr, host := f.h2Dial(t)
			path := "/smuggle-" + strconv.Itoa(i)
			fields := tc.fields(host, path)
			for j := range fields {
				if fields[j] == key {
					fields[j] = "Bearer " + f.ph
				}
			}
			h2Headers(t, fr, 1, tc.data == "", fields...)
			if tc.data != "" {
				fr.WriteData(1, true, []byte(tc.data))
			}
			got := h2Outcome(t, fr, 1, 5*time.Second)
			t.Logf("%s: %s", tc.name, got)
			is.True(!strings.HasPrefix(got, "2")) // answered by the upstream
			time.Sleep(50 * time.Millisecond)
			is.Equal(f.seen(path), "") // reached the upstream
		})
	}
	// The control: a plain stream reaches the upstream with the key.
	is := is.New(t)
	fr, host := f.h2Dial(t)
	h2Headers(t, fr, 1, true, ":method", "GET", ":scheme", "https", ":authority", host, ":path", "/control", "authorization", "Bearer "+f.ph)
	is.Equal(h2Outcome(t, fr, 1, 5*time.Second), "200")
	is.Equal(f.seen("/control"), "Bearer "+canary)
}

// advEchoes is an upstream that echoes the key where a streamed answer
// could carry it past the scrubber: in a 103 (Early Hints) answer's
// fields, in a gzip body whose flushes split it, in a trailer.
func advEchoes(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+canary {
		http.Error(w, "bad key", http.StatusUnauthorized)
		return
	}
	fl := w.(http.Flusher)
	switch r.URL.Path {
	case "/early":
		w.Header().Set("Link", "<https://x.test/"+canary+">; rel=preload")
		w.Header().Set("X-Esc", uEscape(canary))
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Del("X-Esc")
		io.WriteString(w, "ok")
	case "/gzip":
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		for _, piece := range []string{"a=" + canary[:5], canary[5:12], canary[12:] + "\n", "b=" + base64.StdEncoding.EncodeToString([]byte(canary))[:9]} {
			io.WriteString(zw, piece)
			zw.Flush()
			fl.Flush()
			time.Sleep(50 * time.Millisecond)
		}
		io.WriteString(zw, base64.StdEncoding.EncodeToString([]byte(canary))[9:]+"\n")
		zw.Close()
	case "/gzip-late-escape":
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, "fine\n")
		zw.Flush()
		fl.Flush()
		time.Sleep(50 * time.Millisecond)
		io.WriteString(zw, uEscape(canary))
		zw.Close()
	case "/trailer-raw":
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		fl.Flush()
		w.Header().Set("X-Sum", "k="+canary)
	}
}

// TestAdvStreamEchoShapes: a 1xx answer's fields never reach the client
// raw; a gzip body that splits the key (raw and base64) over its
// flushes arrives scrubbed; a late escaped echo in a gzip body cuts the
// answer off; a raw key in a trailer arrives scrubbed; over HTTP/1.1 and
// HTTP/2 inside the tunnel.
func TestAdvStreamEchoShapes(t *testing.T) {
	t.Parallel()
	f := newAdvHTTP(t, advEchoes)
	for _, proto := range []string{"h1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			is := is.New(t)
			c := f.client(t)
			if proto == "h2" {
				c = f.h2client(t)
			}
			var early []string
			get := func(path string) (*http.Response, string, error) {
				req, _ := http.NewRequest("GET", f.url+path, nil)
				req.Header.Set("Authorization", "Bearer "+f.ph)
				req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
						early = append(early, fmt.Sprint(code, h))
						return nil
					}}))
				resp, err := c.Do(req)
				if err != nil {
					return nil, "", err
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				return resp, string(b), err
			}
			resp, body, err := get("/early")
			is.NoErr(err)
			is.Equal(resp.ProtoMajor, map[string]int{"h1": 1, "h2": 2}[proto])
			is.Equal(body, "ok")
			checkNoCanary(t, strings.Join(early, "\n")+fmt.Sprint(resp.Header))

			_, body, err = get("/gzip")
			is.NoErr(err)
			checkNoCanary(t, body)
			is.True(!strings.Contains(body, base64.StdEncoding.EncodeToString([]byte(canary))))
			is.Equal(strings.Count(body, "[REDACTED]"), 2)

			_, body, err = get("/gzip-late-escape")
			is.True(err != nil) // cut off, never a clean end
			checkNoCanary(t, body)

			resp, body, err = get("/trailer-raw")
			is.NoErr(err)
			is.Equal(body, "body")
			is.Equal(resp.Trailer.Get("X-Sum"), "k=[REDACTED]")
		})
	}
}

// TestAdvWSControlFramesCounted (accounting, medium; fixed): the payloads
// of the client's control frames (ping, pong, close) reach the upstream
// but were never counted: network_egress_bytes and the after record's
// bytes_out missed them, so pings of 125 bytes each were an uncounted
// channel to the upstream.
func TestAdvWSControlFramesCounted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	got := make(chan int, 1)
	a := newAdvWS(t, func(p *wsPeer) {
		n := 0
		for {
			h, b, err := p.recv()
			if err != nil || h.Opcode == wsframe.OpClose {
				got <- n
				return
			}
			n += len(b)
		}
	})
	c := a.dialWS(t, "/ws")
	stats := func() uint64 {
		s, err := a.eg.api.Stats(context.Background(), "inv-s")
		is.NoErr(err)
		return s.Invocations[0].NetworkEgressBytes
	}
	before := stats()
	ping := []byte(strings.Repeat("p", wsframe.MaxControlPayload))
	for range 100 {
		is.NoErr(c.send(true, wsframe.OpPing, ping))
	}
	is.NoErr(c.send(true, wsframe.OpClose, wsframe.ClosePayload(1000, "")))
	is.Equal(<-got, 100*len(ping)) // what reached the upstream
	c.recvAll(2 * time.Second)
	is.True(stats()-before >= uint64(100*len(ping))) // counted
}

// TestAdvWSEmptyFramesBounded (resource, high; fixed): a client message
// made of empty continuation frames grew the relay's per-frame
// bookkeeping (two slices, 24 bytes a frame for 6 bytes sent) without
// bound: the message's size stayed 0, so neither -max-request-body nor
// the buffer budget ever saw it, and every frame fed the idle watch. One
// agent could make egressd's memory grow until it was killed (measured:
// ~17 MiB of heap for 2.4 MB sent, under a 1 MiB message cap). Each frame
// now counts against both as frameCost bytes.
func TestAdvWSEmptyFramesBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) { p.recvAll(20 * time.Second) }, "-max-request-body", "1048576", "-idle-timeout", streamIdle.String())
	c := a.dialWS(t, "/ws")
	is.NoErr(c.send(false, wsframe.OpText, nil))
	empty := wsframe.AppendHeader(nil, wsframe.Header{Opcode: wsframe.OpContinuation, Masked: true})
	batch := bytes.Repeat(empty, 10000)
	sent := 0
	for range 40 { // 400,000 frames, 2.4 MB: a 1 MiB message's worth of frames many times over
		c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.c.Write(batch); err != nil {
			break
		}
		sent += 10000
	}
	t.Logf("sent %d empty frames", sent)
	_, code := c.recvAll(streamIdle / 2)
	is.Equal(code, uint16(wsframe.CloseTooBig)) // the relay keeps taking empty frames
}

// TestAdvH2StalledBody (resource, high; fixed): an HTTP/2 stream inside a
// tunnel that announces a large body and sends none of it held its
// budget share and its invocation's request slot forever: the HTTP/1.1
// path gives a body -idle-timeout between reads (408), the HTTP/2 path
// read without any deadline, and the h2 server's own idle timeout does
// not run while a stream is open. A few such streams spent the
// daemon-wide -buffer-budget, and every invocation's requests with a
// body got 503 server.busy for as long as the client kept them.
func TestAdvH2StalledBody(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t, "-buffer-budget", "2097152", "-max-request-body", "1048576", "-idle-timeout", streamIdle.String())
	fr, host := f.h2Dial(t)
	for _, id := range []uint32{1, 3} {
		h2Headers(t, fr, id, false, ":method", "POST", ":scheme", "https", ":authority", host, ":path", "/stall",
			"content-length", "1048576", "authorization", "Bearer "+f.ph)
	}
	outcome := make(chan string, 1)
	go func() { outcome <- h2Outcome(t, fr, 3, 3*streamIdle) }()
	time.Sleep(500 * time.Millisecond)
	post := func() int {
		req, _ := http.NewRequest("POST", f.url+"/small", strings.NewReader("hello"))
		req.Header.Set("Authorization", "Bearer "+f.ph)
		resp, err := f.client(t).Do(req)
		is.NoErr(err)
		resp.Body.Close()
		return resp.StatusCode
	}
	t.Logf("while stalled: %d", post())
	t.Logf("stalled stream: %s", <-outcome)
	is.Equal(post(), 200) // the budget is still held by the stalled streams
}

// TestAdvLongStreamsStarveOthers (resource, medium): a streaming answer
// gives its invocation's request slot back once its header has arrived,
// and outside a tunnel nothing else per invocation bounds it: one
// invocation with long streams to a plain-http origin its policy allows
// takes every one of -proxy-max-conns, and another invocation can no
// longer reach egressd (503 server.busy). Before answers streamed, a
// request held its slot to the end (-proxy-max-requests-per-invocation).
func TestAdvLongStreamsStarveOthers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quick" {
			io.WriteString(w, "ok")
			return
		}
		for { // a byte every 500 ms: a long stream, never idle
			io.WriteString(w, "x")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(up.Close)
	f := newLLMFixture(t, "-proxy-max-conns", "6", "-proxy-max-requests-per-invocation", "2", "-proxy-max-tunnels-per-invocation", "2")
	for _, inv := range []string{"inv-a", "inv-b"} {
		_, err := f.eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: inv, ProxyToken: strings.Repeat(inv[4:], 43),
			Policy: egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: up.URL}}}})
		is.NoErr(err)
	}
	client := func(inv string) *http.Client {
		u, _ := url.Parse("http://" + inv + ":" + strings.Repeat(inv[4:], 43) + "@" + f.info.ProxyAddress)
		return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}, Timeout: 5 * time.Second}
	}
	opened := 0
	for range 6 {
		resp, err := client("inv-a").Get(up.URL + "/long")
		if err != nil {
			t.Logf("inv-a: %v", err)
			break
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Logf("inv-a: %d %s", resp.StatusCode, b)
			resp.Body.Close()
			break
		}
		t.Cleanup(func() { resp.Body.Close() })
		opened++
	}
	t.Logf("inv-a holds %d long streams (its request share is 2)", opened)
	resp, err := client("inv-b").Get(up.URL + "/quick")
	is.NoErr(err)
	is.Equal(resp.StatusCode, 200) // inv-b is not starved by inv-a's long streams
	resp.Body.Close()
}

// TestAdvWSValueSplitAcrossMessages (leak, medium; fixed): an upstream
// that sent the key as two WebSocket messages (as realtime APIs send text
// deltas, one message each) got it to the client whole: each message was
// scrubbed with a fresh scrubber that released its held-back tail at the
// message's end, so the client reassembled the key from the two. What
// the client receives of all messages (and of all control frames) is
// now also read as one text: the message that completes the key closes
// the client with 1008 before it. (A message that ends with 4 or more
// bytes of the key has them replaced at its end, so the split here is
// after 3.)
func TestAdvWSValueSplitAcrossMessages(t *testing.T) {
	t.Parallel()
	for _, ctl := range []bool{false, true} {
		t.Run(fmt.Sprintf("control=%v", ctl), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			op := byte(wsframe.OpText)
			if ctl {
				op = wsframe.OpPing
			}
			a := newAdvWS(t, func(p *wsPeer) {
				p.send(true, op, []byte("key="+canary[:3]))
				p.send(true, op, []byte(canary[3:]))
				p.send(true, wsframe.OpClose, wsframe.ClosePayload(1000, ""))
				time.Sleep(200 * time.Millisecond)
			})
			c := a.dialWS(t, "/ws")
			got, code := c.recvAll(5 * time.Second)
			is.True(!strings.Contains(got, canary[3:])) // the message that completes the key never leaves
			is.Equal(code, uint16(wsframe.ClosePolicy))
			is.True(waitAudit(t, a.eg, `"ended_by":"echo"`))
		})
	}
}

// TestAdvWSPrefixEndsAMessage: an upstream message that ends with most
// of the key reaches the client with that part replaced.
func TestAdvWSPrefixEndsAMessage(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) {
		p.send(true, wsframe.OpText, []byte("key="+canary[:len(canary)-1]))
		p.send(true, wsframe.OpClose, wsframe.ClosePayload(1000, ""))
		time.Sleep(200 * time.Millisecond)
	})
	c := a.dialWS(t, "/ws")
	got, _ := c.recvAll(5 * time.Second)
	is.True(strings.Contains(got, "key=[REDACTED]"))
	is.True(!strings.Contains(got, canary[:4]))
}

// TestWSClientValueSplit: a client that sends a held value or a
// placeholder cut into 1-byte fragments, or across two messages, at
// every cut point, is closed with 1008 (policy), audited; the upstream
// never receives the value whole, and never the bytes of the finding
// within one message: it receives nothing of a message past the
// scanner's release. A clean message cut the same way arrives whole.
func TestWSClientValueSplit(t *testing.T) {
	t.Parallel()
	type got struct {
		data string
		fins int
	}
	var (
		mu   sync.Mutex
		seen = map[string]*got{}
	)
	a := newAdvWS(t, func(p *wsPeer) {
		var id string
		for {
			h, b, err := p.recv()
			if err != nil || h.Opcode == wsframe.OpClose {
				return
			}
			if h.IsControl() {
				continue
			}
			mu.Lock()
			if id == "" {
				id, _, _ = strings.Cut(string(b), "|")
				seen[id] = &got{}
			}
			seen[id].data += string(b)
			if h.Fin {
				seen[id].fins++
			}
			mu.Unlock()
		}
	})
	find := func(id string) got {
		mu.Lock()
		defer mu.Unlock()
		if g := seen[id]; g != nil {
			return *g
		}
		return got{}
	}
	for _, tc := range []struct {
		name, finding string
		policy        bool
	}{
		{"value", canary, true},
		{"placeholder", "", true}, // a.ph, once the fixture is up
		{"clean", "nothing-held-here-at-all", false},
	} {
		finding := tc.finding
		if finding == "" {
			finding = a.ph
		}
		for cut := 1; cut < len(finding); cut += 4 {
			for _, split := range []string{"fragments", "messages"} {
				id := tc.name + "-" + split + "-" + strconv.Itoa(cut)
				t.Run(id, func(t *testing.T) {
					is := is.New(t)
					c := a.dialWS(t, "/ws")
					first, second := id+"|"+finding[:cut], finding[cut:]+"|end"
					if split == "fragments" {
						is.NoErr(c.send(false, wsframe.OpText, []byte(first)))
						for i := 0; i < len(second); i++ {
							err := c.send(i == len(second)-1, wsframe.OpContinuation, []byte{second[i]})
							if i < len(finding)-cut || !tc.policy {
								is.NoErr(err)
							} // after the finding is whole, egressd may have closed
						}
					} else {
						is.NoErr(c.send(true, wsframe.OpText, []byte(first)))
						if err := c.send(true, wsframe.OpText, []byte(second)); !tc.policy {
							is.NoErr(err)
						}
					}
					if !tc.policy {
						for deadline := time.Now().Add(5 * time.Second); find(id).data != first+second && time.Now().Before(deadline); {
							time.Sleep(10 * time.Millisecond)
						}
						is.Equal(find(id).data, first+second)
						return
					}
					_, code := c.recvAll(5 * time.Second)
					g := find(id)
					is.True(!strings.Contains(g.data, finding)) // never whole upstream
					is.Equal(code, uint16(wsframe.ClosePolicy))
					if split == "fragments" {
						is.Equal(g.fins, 0)               // the message never ended upstream
						is.True(len(g.data) <= len(id)+1) // nothing from the finding's first byte on
					}
				})
			}
		}
	}
	is := is.New(t)
	is.True(waitAudit(t, a.eg, `"ended_by":"policy"`))
	checkNoCanary(t, a.eg.stderr.String()+a.eg.auditLog(t))
}

// TestAdvStreamProperPrefixAtEnd: an answer that ends with the key minus
// its last character (a destination that truncates an echo) would hand
// the client all but one character, guessed in a few dozen tries; the
// tail is replaced at the answer's end instead, and text after a prefix
// shows that one followed by more text is not.
func TestAdvStreamProperPrefixAtEnd(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newAdvHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+canary {
			return
		}
		io.WriteString(w, "your key: "+canary[:len(canary)-1])
		if r.URL.Path == "/prefix-then-text" {
			io.WriteString(w, " and more")
		}
	})
	for _, tt := range []struct{ path, want string }{
		{"/prefix", "your key: [REDACTED]"},
		{"/prefix-then-text", "your key: " + canary[:len(canary)-1] + " and more"},
	} {
		resp, err := f.get(t, f.client(t), tt.path)
		is.NoErr(err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		is.NoErr(err)
		is.Equal(string(b), tt.want)
	}
}
