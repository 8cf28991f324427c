//go:build linux

package main

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
)

func basic(inv, tok string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(inv+":"+tok))
}

func (f *proxyFixture) dialTCP() (net.Conn, error)  { return net.Dial("tcp", f.info.ProxyAddress) }
func (f *proxyFixture) dialUnix() (net.Conn, error) { return net.Dial("unix", f.info.ProxySocket) }

// rawProxy writes raw to a new proxy connection and reads one response.
func (f *proxyFixture) rawProxy(t *testing.T, dial func() (net.Conn, error), raw string) *http.Response {
	t.Helper()
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// dialProxy opens a TCP connection to the proxy face at addr, with a 20 s
// deadline, closed when t ends.
func dialProxy(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

// proxyConnect sends CONNECT authority as inv:tok on a new connection to
// addr and returns the connection with egressd's answer.
func proxyConnect(t *testing.T, addr, authority, inv, tok string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, br := dialProxy(t, addr)
	if _, err := io.WriteString(c, "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\nProxy-Authorization: "+basic(inv, tok)+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp
}

// connectTLS opens CONNECT authority as inv and a TLS client inside it
// that trusts egressd's bundle.
func (f *proxyFixture) connectTLS(t *testing.T, inv, tok, authority string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	is := is.New(t)
	c, _, resp := proxyConnect(t, f.info.ProxyAddress, authority, inv, tok)
	is.Equal(resp.StatusCode, 200)
	host, _, _ := net.SplitHostPort(authority)
	tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: f.bundlePool(t)})
	is.NoErr(tc.Handshake())
	return tc, bufio.NewReader(tc)
}

func code(resp *http.Response) string { return resp.Header.Get("X-Hostkit-Error") }

// TestProxyTunnels: opaque tunnels for an invocation without credentials
// (the client sees the server's own certificate; bytes counted, only
// outbound in network_egress_bytes), interception for one with
// credentials, and each refusal with its code.
func TestProxyTunnels(t *testing.T) {
	t.Parallel()
	f := newProxyFixture(t)
	t.Run("opaque tunnel, end to end TLS, counted", func(t *testing.T) {
		is := is.New(t)
		c := f.client("inv-3", f.tok3, f.ca.Pool) // trusts only the test CA: egressd's leaf would fail
		resp, err := c.Get(f.otherURL + "/big")
		is.NoErr(err)
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		is.Equal(n, int64(bigSize))
		is.Equal(resp.TLS.PeerCertificates[0].Issuer.CommonName, "egressd test CA")
		c.CloseIdleConnections()
		st, err := f.eg.api.Stats(ctx, "inv-3")
		is.NoErr(err)
		out := st.Invocations[0].NetworkEgressBytes
		is.True(out > 200 && out < 16<<10) // the ClientHello and the request, not the megabyte back
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(f.eg.auditLog(t), `"mode":"tunnel","origin"`) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		audit := f.eg.auditLog(t)
		is.True(strings.Contains(audit, `"bytes_in":10`)) // 1 MiB and TLS framing: 10xxxxx bytes
	})
	t.Run("credentials mean interception", func(t *testing.T) {
		is := is.New(t)
		tc, br := f.connectTLS(t, "inv-1", f.tok1, strings.TrimPrefix(f.otherURL, "https://"))
		is.Equal(tc.ConnectionState().PeerCertificates[0].Issuer.CommonName, "hostkit egressd local CA")
		io.WriteString(tc, "GET /in HTTP/1.1\r\nHost: "+strings.TrimPrefix(f.otherURL, "https://")+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		is.NoErr(err)
		is.Equal(resp.StatusCode, 200)
	})
	t.Run("CONNECT A, inner Host B", func(t *testing.T) {
		is := is.New(t)
		tc, br := f.connectTLS(t, "inv-1", f.tok1, strings.TrimPrefix(f.apiURL, "https://"))
		io.WriteString(tc, "GET / HTTP/1.1\r\nHost: "+strings.TrimPrefix(f.otherURL, "https://")+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		is.NoErr(err)
		is.Equal(resp.StatusCode, http.StatusMisdirectedRequest)
		is.Equal(code(resp), "egress.header_invalid")
	})
	t.Run("CONNECT A, absolute-form inner request to B", func(t *testing.T) {
		is := is.New(t)
		tc, br := f.connectTLS(t, "inv-1", f.tok1, strings.TrimPrefix(f.apiURL, "https://"))
		io.WriteString(tc, "GET "+f.otherURL+"/ HTTP/1.1\r\nHost: "+strings.TrimPrefix(f.otherURL, "https://")+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		is.NoErr(err)
		is.Equal(resp.StatusCode, http.StatusMisdirectedRequest)
		is.Equal(code(resp), "egress.invalid_request")
	})
	for _, tc := range []struct{ name, raw, status, code string }{
		{"CONNECT to egressd's own port", "CONNECT " + f.info.ProxyAddress + " HTTP/1.1\r\nHost: " + f.info.ProxyAddress + "\r\nProxy-Authorization: " + basic("inv-3", f.tok3) + "\r\n\r\n", "403", "egress.address_forbidden"},
		{"CONNECT outside the policy", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: " + basic("inv-3", f.tok3) + "\r\n\r\n", "403", "egress.policy_denied"},
		{"missing proxy token", "CONNECT " + strings.TrimPrefix(f.otherURL, "https://") + " HTTP/1.1\r\nHost: " + strings.TrimPrefix(f.otherURL, "https://") + "\r\n\r\n", "407", "peer.denied"},
		{"wrong proxy token", "CONNECT " + strings.TrimPrefix(f.otherURL, "https://") + " HTTP/1.1\r\nHost: " + strings.TrimPrefix(f.otherURL, "https://") + "\r\nProxy-Authorization: " + basic("inv-3", f.tok1) + "\r\n\r\n", "407", "peer.denied"},
		{"plain http, wrong token", "GET " + f.plainURL + "/ HTTP/1.1\r\nHost: " + strings.TrimPrefix(f.plainURL, "http://") + "\r\nProxy-Authorization: " + basic("inv-1", f.tok3) + "\r\n\r\n", "407", "peer.denied"},
		{"origin-form to the proxy", "GET / HTTP/1.1\r\nHost: x\r\nProxy-Authorization: " + basic("inv-3", f.tok3) + "\r\n\r\n", "400", "egress.invalid_request"},
		{"plain http outside the policy", "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: " + basic("inv-3", f.tok3) + "\r\n\r\n", "403", "egress.policy_denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			resp := f.rawProxy(t, f.dialTCP, tc.raw)
			is.Equal(resp.Status[:3], tc.status)
			is.Equal(code(resp), tc.code)
			if tc.status == "407" {
				is.True(strings.HasPrefix(resp.Header.Get("Proxy-Authenticate"), "Basic"))
			}
		})
	}
	t.Run("dropped bundle's token", func(t *testing.T) {
		is := is.New(t)
		is.NoErr(f.eg.api.BundleDrop(ctx, "inv-2"))
		api := strings.TrimPrefix(f.apiURL, "https://")
		resp := f.rawProxy(t, f.dialTCP, "CONNECT "+api+" HTTP/1.1\r\nHost: "+api+"\r\nProxy-Authorization: "+basic("inv-2", f.tok2)+"\r\n\r\n")
		is.Equal(resp.StatusCode, http.StatusProxyAuthRequired)
		is.Equal(code(resp), "peer.denied")
		is.True(strings.Contains(f.eg.auditLog(t), `"why":"unknown_invocation"`))
	})
	f.checkCanary(t, "")
}

// A tunnel in which nothing moves either way for -proxy-idle-timeout is
// closed, with its upstream connection (a client that went quiet holds
// nothing forever); one in which bytes keep moving in one direction stays
// open past it, however quiet the other direction is.
func TestTunnelIdleTimeout(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	const idle = 500 * time.Millisecond
	// The upstream: silent, unless asked to drip 15 bytes 100 ms apart.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	closed := make(chan time.Time, 4) // when egressd closed an upstream connection
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil && line == "drip\n" {
					for range 15 {
						time.Sleep(100 * time.Millisecond)
						io.WriteString(c, "x")
					}
					io.WriteString(c, "done\n")
				}
				io.Copy(io.Discard, c) // until egressd closes it
				closed <- time.Now()
			}()
		}
	}()
	authority := "quiet.test:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	startSecretd(t, root)
	eg := startEgressd(t, root, "-proxy-idle-timeout", idle.String(), "-resolve", authority+":127.0.0.1")
	info, err := eg.api.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok := strings.Repeat("q", 43)
	_, err = eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-q", ProxyToken: tok,
		Policy: egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "https://" + authority}}}})
	if err != nil {
		t.Fatal(err)
	}
	open := func(t *testing.T) (net.Conn, *bufio.Reader) {
		c, br, resp := proxyConnect(t, info.ProxyAddress, authority, "inv-q", tok)
		is.New(t).Equal(resp.StatusCode, 200)
		return c, br
	}
	t.Run("quiet both ways: closed", func(t *testing.T) {
		is := is.New(t)
		c, br := open(t)
		begin := time.Now()
		_, err := br.ReadByte()
		is.Equal(err, io.EOF) // egressd ended the tunnel
		took := time.Since(begin)
		is.True(took >= idle-50*time.Millisecond && took < 10*time.Second)
		select {
		case <-closed: // the upstream side went too
		case <-time.After(10 * time.Second):
			t.Fatal("the upstream connection stayed open")
		}
		c.Close()
	})
	t.Run("bytes moving one way: kept open", func(t *testing.T) {
		is := is.New(t)
		c, br := open(t)
		begin := time.Now()
		_, err := io.WriteString(c, "drip\n")
		is.NoErr(err)
		got, err := br.ReadString('\n')
		is.NoErr(err)
		is.Equal(got, strings.Repeat("x", 15)+"done\n")
		is.True(time.Since(begin) > 3*idle) // open well past the idle timeout, the upload side quiet
	})
}

// TestTunnelEndsWithBundle: bundle.drop closes the invocation's open
// opaque tunnels at once (a dropped invocation reaches nothing), and
// leaves another invocation's tunnel working.
func TestTunnelEndsWithBundle(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := newRoot(t)
	authority := "echo.test:" + echoServer(t) // the upstream echoes until its client goes
	startSecretd(t, root)
	eg := startEgressd(t, root, "-resolve", authority+":127.0.0.1")
	info, err := eg.api.Info(ctx)
	is.NoErr(err)
	allow := egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "https://" + authority}}}
	open := func(inv string) (net.Conn, *bufio.Reader) {
		tok := strings.Repeat(inv[len(inv)-1:], 43)
		_, err := eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: inv, ProxyToken: tok, Policy: allow})
		is.NoErr(err)
		c, br, resp := proxyConnect(t, info.ProxyAddress, authority, inv, tok)
		is.Equal(resp.StatusCode, 200)
		return c, br
	}
	echo := func(c net.Conn, br *bufio.Reader) (string, error) {
		if _, err := io.WriteString(c, "ping\n"); err != nil {
			return "", err
		}
		return br.ReadString('\n')
	}
	ca, bra := open("inv-a")
	cb, brb := open("inv-b")
	for _, p := range []struct {
		c  net.Conn
		br *bufio.Reader
	}{{ca, bra}, {cb, brb}} {
		got, err := echo(p.c, p.br)
		is.NoErr(err)
		is.Equal(got, "ping\n")
	}
	err = eg.api.BundleDrop(ctx, "inv-a")
	is.NoErr(err)
	begin := time.Now()
	_, err = bra.ReadByte()
	is.Equal(err, io.EOF) // inv-a's tunnel closed by egressd
	is.True(time.Since(begin) < 5*time.Second)
	got, err := echo(cb, brb) // inv-b's still carries bytes
	is.NoErr(err)
	is.Equal(got, "ping\n")
	// The tunnel's record is written once both of its copies have ended,
	// which may be just after the client saw its connection close.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(eg.auditLog(t), `"ended_by":"bundle.drop"`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	is.True(strings.Contains(eg.auditLog(t), `"ended_by":"bundle.drop"`))
}

// TestProxyAuthAuditBounded: failed proxy authentications and malformed
// requests, which any local process can cause without a token, cannot
// flood the audit log
// (and rotate it away): past -proxy-auth-audit-rate they get their 407
// without a record, the next record (or the one egressd writes when it
// stops) counts them, and each field of such a record is at most a few
// hundred bytes however long the request. A client with a token is
// served and audited as usual throughout.
func TestProxyAuthAuditBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := newRoot(t)
	const flood = 80
	const sent = flood + 1 + 20
	// Runs after egressd has stopped (cleanups run last-in first-out).
	t.Cleanup(func() {
		b, err := os.ReadFile(filepath.Join(root, "log", "egressd", "audit.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		records, counted, summaries := 0, 0, 0
		for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			var r struct {
				Op     string         `json:"op"`
				Fields map[string]any `json:"fields"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("audit line: %v", err)
			}
			if r.Fields["invocation"] != nil || (r.Op != "egress.proxy_auth" && r.Op != "egress.request") {
				continue // authenticated, or not a refusal of the proxy face
			}
			if r.Op == "egress.request" && r.Fields["via"] == nil {
				continue
			}
			if len(line) > 2048 {
				t.Errorf("a refusal record of %d bytes", len(line))
			}
			if n, ok := r.Fields["suppressed"].(float64); ok {
				counted += int(n)
			}
			if _, ok := r.Fields["via"]; ok {
				records++
			} else {
				summaries++ // written by egressd as it stopped
			}
		}
		if records+counted != sent || records >= sent/2 || summaries != 1 {
			t.Errorf("%d failures: %d records, %d counted in suppressed fields, %d summaries", sent, records, counted, summaries)
		}
	})
	startSecretd(t, root)
	eg := startEgressd(t, root, "-proxy-auth-audit-rate", "2") // a burst of 10
	info, err := eg.api.Info(ctx)
	is.NoErr(err)
	tok := strings.Repeat("t", 43)
	up := httptestPlain(t)
	_, err = eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-t", ProxyToken: tok,
		Policy: egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "http://" + up}}}})
	is.NoErr(err)
	longMethod := strings.Repeat("M", 20000)
	bad := func() {
		c, br := dialProxy(t, info.ProxyAddress)
		defer c.Close()
		_, err = io.WriteString(c, longMethod+" http://"+up+"/ HTTP/1.1\r\nHost: "+up+"\r\n\r\n")
		is.NoErr(err)
		resp, err := http.ReadResponse(br, nil)
		is.NoErr(err)
		is.Equal(resp.StatusCode, http.StatusProxyAuthRequired) // always answered
	}
	garbage := func() { // not HTTP at all: 400 egress.invalid_request, also before any token
		c, br := dialProxy(t, info.ProxyAddress)
		defer c.Close()
		_, err = io.WriteString(c, "\x00\x01 not http\r\n\r\n")
		is.NoErr(err)
		resp, err := http.ReadResponse(br, nil)
		is.NoErr(err)
		is.Equal(resp.StatusCode, http.StatusBadRequest)
	}
	for i := range flood {
		if i%2 == 0 {
			bad()
		} else {
			garbage()
		}
	}
	u, _ := url.Parse("http://inv-t:" + tok + "@" + info.ProxyAddress)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
	resp, err := client.Get("http://" + up + "/ok")
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, 200) // the token holder is served
	is.True(strings.Contains(eg.auditLog(t), `"op":"egress.request"`))
	time.Sleep(600 * time.Millisecond) // a token back in the bucket: the next failure is recorded with the count
	bad()
	for range 20 { // left for the summary egressd writes as it stops
		bad()
	}
}

// httptestPlain serves "ok" over plain HTTP on 127.0.0.1 and returns its
// address.
func httptestPlain(t *testing.T) string {
	t.Helper()
	return httptestHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
}

// echoServer accepts TCP connections on 127.0.0.1 and echoes each back
// until its client closes; it returns the port.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// TestProxyPerInvocationLimits: one invocation cannot take every tunnel
// or pile up requests (503 server.busy for it), while another invocation
// is still served; TCP connections past -proxy-max-conns get 503
// server.busy while the Unix socket (its own cap) still serves, and a new
// TCP connection is served once an old one has gone.
func TestProxyPerInvocationLimits(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	slow := httptestHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	authority := "echo.test:" + echoServer(t)
	startSecretd(t, root)
	eg := startEgressd(t, root, "-resolve", authority+":127.0.0.1", "-proxy-max-tunnels", "8",
		"-proxy-max-tunnels-per-invocation", "2", "-proxy-max-requests-per-invocation", "1", "-proxy-max-conns", "12")
	info, err := eg.api.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	allow := egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "https://" + authority}, {Origin: "http://" + slow}}}
	for _, inv := range []string{"inv-a", "inv-b"} {
		if _, err := eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: inv,
			ProxyToken: strings.Repeat(inv[4:], 43), Policy: allow}); err != nil {
			t.Fatal(err)
		}
	}
	dial := func(t *testing.T) (net.Conn, *bufio.Reader) { return dialProxy(t, info.ProxyAddress) }
	connect := func(t *testing.T, inv string) *http.Response {
		_, _, resp := proxyConnect(t, info.ProxyAddress, authority, inv, strings.Repeat(inv[4:], 43))
		return resp
	}
	get := func(t *testing.T, inv, path string) *http.Response {
		c, br := dial(t)
		io.WriteString(c, "GET http://"+slow+path+" HTTP/1.1\r\nHost: "+slow+"\r\nProxy-Authorization: "+basic(inv, strings.Repeat(inv[4:], 43))+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	t.Run("tunnels", func(t *testing.T) {
		is := is.New(t)
		is.Equal(connect(t, "inv-a").StatusCode, 200)
		is.Equal(connect(t, "inv-a").StatusCode, 200)
		third := connect(t, "inv-a")
		is.Equal(third.StatusCode, http.StatusServiceUnavailable)
		is.Equal(code(third), "server.busy")
		is.Equal(connect(t, "inv-b").StatusCode, 200) // the other invocation still gets one
	})
	t.Run("requests in flight", func(t *testing.T) {
		is := is.New(t)
		first := make(chan *http.Response, 1)
		go func() { first <- get(t, "inv-a", "/slow") }()
		<-entered // inv-a's request is in the pipeline, waiting on the upstream
		second := get(t, "inv-a", "/fast")
		is.Equal(second.StatusCode, http.StatusServiceUnavailable)
		is.Equal(code(second), "server.busy")
		is.Equal(get(t, "inv-b", "/fast").StatusCode, 200) // another invocation is served
		close(release)
		is.Equal((<-first).StatusCode, 200)
		is.Equal(get(t, "inv-a", "/fast").StatusCode, 200) // its slot is back
	})
	t.Run("connections", func(t *testing.T) {
		is := is.New(t)
		// Idle connections until one is refused: admitted ones are kept
		// open (egressd waits for their first request), so the count only
		// grows until it reaches the cap of 12.
		var idle []net.Conn
		var over *http.Response
		for n := 0; over == nil; n++ {
			if n > 40 {
				t.Fatal("no connection over the cap was refused")
			}
			c, br := dial(t)
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if resp, err := http.ReadResponse(br, nil); err == nil {
				over = resp
				continue
			}
			_ = c.SetReadDeadline(time.Time{})
			idle = append(idle, c)
		}
		is.Equal(over.StatusCode, http.StatusServiceUnavailable)
		is.True(len(idle) >= 12-3) // the cap, less what the subtests above may not have closed yet
		deadline := time.Now().Add(10 * time.Second)
		is.Equal(code(over), "server.busy")
		// The Unix socket has its own cap: TCP clients (which need nothing
		// to connect) cannot starve network-isolated agents there.
		u, err := net.Dial("unix", info.ProxySocket)
		is.NoErr(err)
		defer u.Close()
		_ = u.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(u, "GET http://"+slow+"/fast HTTP/1.1\r\nHost: "+slow+"\r\nProxy-Authorization: "+basic("inv-b", strings.Repeat("b", 43))+"\r\n\r\n")
		viaUnix, err := http.ReadResponse(bufio.NewReader(u), nil)
		is.NoErr(err)
		is.Equal(viaUnix.StatusCode, 200)
		idle[0].Close()
		for {
			if time.Now().After(deadline) {
				t.Fatal("no connection was served after one closed")
			}
			resp := get(t, "inv-b", "/fast")
			if resp.StatusCode == 200 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// httptestHandler serves h over plain HTTP on 127.0.0.1 and returns its
// address.
func httptestHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}
