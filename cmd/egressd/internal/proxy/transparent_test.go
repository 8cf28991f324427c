package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
)

// transparentHarness is a harness with upstreams for transparent
// connections on loopback: a TLS echo for tls.example.com, a raw echo
// for raw.example.com and a plain HTTP server on 127.0.0.1; and a bundle
// "raw" (no credential) whose policy adds tcp://raw.example.com:<raw port>
// https://tls.example.com:<tls port> and the HTTP server's loopback origin, and a bundle "rawcred" holding a
// credential with the same rules.
type transparentHarness struct {
	*harness
	tlsPort, rawPort, httpPort string
	tokRaw                     string
	upRoots                    *x509.CertPool // trusts the TLS echo's leaf
}

func newTransparentHarness(t *testing.T) *transparentHarness {
	t.Helper()
	th := &transparentHarness{tokRaw: strings.Repeat("r", 43)}
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("tls.example.com")
	if err != nil {
		t.Fatal(err)
	}
	echo := func(l net.Listener) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}
	tl, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*leaf}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close() })
	go echo(tl)
	rl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	go echo(rl)
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "plain-ok auth="+r.Header.Get("Authorization"))
	})}
	go hs.Serve(hl)
	t.Cleanup(func() { hs.Close() })
	port := func(l net.Listener) string { return strconv.Itoa(l.Addr().(*net.TCPAddr).Port) }
	th.tlsPort, th.rawPort, th.httpPort = port(tl), port(rl), port(hl)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	th.upRoots = roots
	th.harness = newHarness(t, func(c *Config) {
		lo := netip.MustParseAddr("127.0.0.1")
		tr := transport.New(transport.Config{HostMap: transport.HostMap{
			"api.example.com:443": lo, "tls.example.com:" + th.tlsPort: lo, "raw.example.com:" + th.rawPort: lo,
			"other.example.com:" + th.rawPort: lo,
		}, RootCAs: roots, DialTimeout: 2 * time.Second})
		t.Cleanup(tr.Close)
		c.Transport = tr
		pol := egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "https://*.example.com"},
			{Origin: "tcp://raw.example.com:" + th.rawPort}, {Origin: "https://tls.example.com:" + th.tlsPort}, {Origin: "http://127.0.0.1:" + th.httpPort}}}
		for _, r := range []*egressdapi.BundleRegisterRequest{
			{Invocation: "raw", ProxyToken: th.tokRaw, Policy: pol},
			{Invocation: "rawcred", ProxyToken: strings.Repeat("q", 43), Policy: pol, Handles: [][]byte{{2}}},
		} {
			if _, err := c.Registry.Register(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
	})
	return th
}

func (th *transparentHarness) authOf(inv string) string {
	tok := map[string]string{"raw": th.tokRaw, "rawcred": strings.Repeat("q", 43), "cred": th.tokCred, "open": th.tokOpen}[inv]
	return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(inv+":"+tok)) + "\r\n"
}

// open sends a transparent CONNECT as inv over the Unix socket (or TCP)
// and returns the connection and the answer.
func (th *transparentHarness) open(t *testing.T, via, inv, authority, mode string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c, err := th.dialers()[via]()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\n"+th.authOf(inv)+egressdapi.HeaderTransparent+": "+mode+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", authority, err)
	}
	if resp.StatusCode != 200 {
		t.Logf("CONNECT %s as %s (%s): %s %s", authority, inv, mode, resp.Status, resp.Header.Get(HeaderError))
	}
	return c, br, resp
}

// TestTransparentHeaderOnlyOnUnix: the header is refused on the TCP
// listener whatever its value (egress.transparent_refused, audited) and
// an unknown value is refused on the Unix socket; a good one is taken
// there.
func TestTransparentHeaderOnlyOnUnix(t *testing.T) {
	t.Parallel()
	th := newTransparentHarness(t)
	for _, tc := range []struct {
		name, via, mode string
		status          int
	}{
		{"tcp tls", "tcp", "tls", 400},
		{"tcp other", "tcp", "other", 400},
		{"unix unknown", "unix", "udp", 400},
		{"unix tls", "unix", "tls", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			_, _, resp := th.open(t, tc.via, "raw", "tls.example.com:"+th.tlsPort, tc.mode)
			is.Equal(resp.StatusCode, tc.status)
			if tc.status != 200 {
				is.Equal(resp.Header.Get(HeaderError), egressdapi.CodeTransparentRefused)
			}
		})
	}
	is.New(t).True(th.waitAudit(t, `"code":"egress.transparent_refused"`))
}

// TestTransparentTLSServerName: an opaque transparent TLS tunnel (no
// credential) reaches the upstream when the ClientHello names the CONNECT
// host, and is refused and audited when it names another; the intercepted
// one (credential holder) substitutes as a proxied CONNECT does.
func TestTransparentTLSServerName(t *testing.T) {
	t.Parallel()
	th := newTransparentHarness(t)
	roots := th.upRoots
	t.Run("matching name, opaque", func(t *testing.T) {
		is := is.New(t)
		c, br, resp := th.open(t, "unix", "raw", "tls.example.com:"+th.tlsPort, egressdapi.TransparentTLS)
		is.Equal(resp.StatusCode, 200)
		tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{ServerName: "tls.example.com", RootCAs: roots})
		is.NoErr(tc.Handshake()) // with the upstream itself: the ClientHello was passed on
		io.WriteString(tc, "ping\n")
		line, err := bufio.NewReader(tc).ReadString('\n')
		is.NoErr(err)
		is.Equal(line, "ping\n")
	})
	t.Run("another name, opaque", func(t *testing.T) {
		is := is.New(t)
		c, br, resp := th.open(t, "unix", "raw", "tls.example.com:"+th.tlsPort, egressdapi.TransparentTLS)
		is.Equal(resp.StatusCode, 200)
		tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{ServerName: "other.example.com", RootCAs: roots})
		is.True(tc.Handshake() != nil)
		is.True(th.waitAudit(t, `"code":"egress.invalid_request"`))
		is.True(th.waitAudit(t, `"transparent":"tls"`))
	})
	t.Run("intercepted, substituted", func(t *testing.T) {
		is := is.New(t)
		_, _, resp := th.open(t, "unix", "cred", "api.example.com:443", egressdapi.TransparentTLS)
		is.Equal(resp.StatusCode, 200) // intercepted as a proxied CONNECT (the handshake is egressd's)
	})
	th.checkCanary(t)
}

// TestTransparentRawTCP: a connection neither TLS nor HTTP is tunnelled
// only with a tcp:// rule for its authority and no credential; without
// the rule, with a credential, or over TCP it is refused.
func TestTransparentRawTCP(t *testing.T) {
	t.Parallel()
	th := newTransparentHarness(t)
	for _, tc := range []struct {
		name, inv, host, code string
	}{
		{"rule, no credential", "raw", "raw.example.com", ""},
		{"no rule", "open", "raw.example.com", egressdapi.CodeRawTCPDenied},
		{"rule for another host", "raw", "other.example.com", egressdapi.CodeRawTCPDenied},
		{"rule, credential held", "rawcred", "raw.example.com", egressdapi.CodeRawTCPDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c, br, resp := th.open(t, "unix", tc.inv, tc.host+":"+th.rawPort, egressdapi.TransparentOther)
			if tc.code != "" {
				is.Equal(resp.StatusCode, 403)
				is.Equal(resp.Header.Get(HeaderError), tc.code)
				return
			}
			is.Equal(resp.StatusCode, 200)
			io.WriteString(c, "SSH-2.0-test\r\n")
			line, err := br.ReadString('\n')
			is.NoErr(err)
			is.Equal(line, "SSH-2.0-test\r\n")
		})
	}
	is.New(t).True(th.waitAudit(t, `"transparent":"other"`, `"outcome":"ok"`))
	is.New(t).True(th.waitAudit(t, `"transparent":"other"`, `"code":"egress.raw_tcp_denied"`)) // refusals name the mode too
	th.checkCanary(t)
}

// TestTransparentPlainHTTP: a peeked plain-HTTP connection is served as
// plain-HTTP proxy requests to http://<authority>: an allowed loopback
// origin is reached, a non-loopback http origin is refused by policy, a
// placeholder over plaintext is refused, and a Host naming another
// authority is misdirected.
func TestTransparentPlainHTTP(t *testing.T) {
	t.Parallel()
	th := newTransparentHarness(t)
	ph := "hkp_abcdefghijklmnopqrstuvwxyz234567"
	for _, tc := range []struct {
		name, inv, authority, host, extra string
		status                            int
		body                              string
	}{
		{"allowed loopback", "raw", "127.0.0.1:" + th.httpPort, "127.0.0.1:" + th.httpPort, "", 200, "plain-ok auth="},
		{"not allowed", "open", "api.example.com:80", "api.example.com", "", 403, ""},
		{"placeholder over plaintext", "cred", "api.example.com:80", "api.example.com", "Authorization: Bearer " + ph + "\r\n", 403, ""},
		{"other Host", "raw", "127.0.0.1:" + th.httpPort, "evil.example.com", "", 421, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c, br, resp := th.open(t, "unix", tc.inv, tc.authority, egressdapi.TransparentHTTP)
			is.Equal(resp.StatusCode, 200)
			io.WriteString(c, "GET /x HTTP/1.1\r\nHost: "+tc.host+"\r\n"+tc.extra+"\r\n")
			r, err := http.ReadResponse(br, nil)
			is.NoErr(err)
			b, _ := io.ReadAll(r.Body)
			is.Equal(r.StatusCode, tc.status)
			if tc.body != "" {
				is.Equal(string(b), tc.body)
			} else {
				is.True(r.Header.Get(HeaderError) != "")
			}
		})
	}
	th.checkCanary(t)
}
