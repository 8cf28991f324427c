//go:build linux

package netns

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/net/dns/dnsmessage"
	"hostkit.dev/lib/api/egressdapi"
)

// fakeProxy is egressd's proxy socket as the relay sees it: it records
// each CONNECT, refuses the authorities in deny (403, as egressd does)
// and echoes everything else.
type fakeProxy struct {
	mu       sync.Mutex
	connects []string // "authority mode auth"
	deny     map[string]bool
}

func (f *fakeProxy) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.connects...)
}

func (f *fakeProxy) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			req, err := http.ReadRequest(br)
			if err != nil || req.Method != http.MethodConnect {
				return
			}
			f.mu.Lock()
			f.connects = append(f.connects, req.RequestURI+" "+req.Header.Get(egressdapi.HeaderTransparent)+" "+req.Header.Get("Proxy-Authorization"))
			f.mu.Unlock()
			if f.deny[req.RequestURI] {
				io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nX-Hostkit-Error: egress.policy_denied\r\nContent-Length: 7\r\n\r\ndenied\n")
				return
			}
			io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
			io.Copy(c, br)
		}()
	}
}

// inNS runs f on the namespace's thread (its sockets are the namespace's).
func inNS(t *testing.T, ns *NS, f func() error) {
	t.Helper()
	if err := ns.Do(f); err != nil {
		t.Fatal(err)
	}
}

// resolve sends one A query to addr over UDP from inside ns.
func resolve(t *testing.T, ns *NS, addr, name string) (dnsmessage.RCode, []netip.Addr) {
	t.Helper()
	var rc dnsmessage.RCode
	var out []netip.Addr
	inNS(t, ns, func() error {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(query(t, name, dnsmessage.TypeA)); err != nil {
			return err
		}
		b := make([]byte, 512)
		n, err := c.Read(b)
		if err != nil {
			return err
		}
		rc, out, _ = parsed(t, b[:n])
		return nil
	})
	return rc, out
}

// exchange connects to addr from inside ns, writes first and reads what
// comes back until EOF (or an error, returned).
func exchange(t *testing.T, ns *NS, addr, first string) (string, error) {
	t.Helper()
	var got []byte
	var rerr error
	inNS(t, ns, func() error {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			rerr = err
			return nil
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		// A reset that arrives before the write is reported to the write
		// alone (the kernel clears the socket's error once reported),
		// and the read after it sees a plain EOF: keep the first error.
		_, werr := io.WriteString(c, first)
		if werr == nil {
			werr = c.(*net.TCPConn).CloseWrite()
		}
		got, rerr = io.ReadAll(c)
		if werr != nil {
			rerr = werr
		}
		return nil
	})
	return string(got), rerr
}

// TestTransparentEgress: in a namespace with transparent egress, an
// allowed name resolves to a synthetic address whose connections reach the
// proxy socket as CONNECT name:port with the instance's credentials and
// what was peeked; literal IPv4 and IPv6 addresses stay literal; a denied
// name is REFUSED; a synthetic address no name holds is reset; UDP
// outside :53 is dropped and counted, UDP to any :53 reaches the
// bridge's resolver; loopback is the namespace's own.
func TestTransparentEgress(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	is := is.New(t)
	dir, err := os.MkdirTemp("/tmp", "nst")
	is.NoErr(err)
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "proxy.sock")
	ul, err := net.Listen("unix", sock)
	is.NoErr(err)
	defer ul.Close()
	fp := &fakeProxy{deny: map[string]bool{"192.0.2.10:80": true}}
	go fp.serve(ul)

	ns, err := New()
	is.NoErr(err)
	defer ns.Close()
	ctx, cancel := context.WithCancel(context.Background())
	e, done, err := ns.TransparentEgress(ctx, EgressConfig{ProxySocket: sock, Invocation: "inv", Token: "tok",
		Allow: []string{"https://api.example.com", "tcp://db.example.net:5432"}, Log: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("transparent egress did not stop with its context")
		}
	}()

	rc, addrs := resolve(t, ns, "127.0.0.1:53", "api.example.com.")
	is.Equal(rc, dnsmessage.RCodeSuccess)
	is.Equal(len(addrs), 1)
	is.True(SyntheticPrefix.Contains(addrs[0]))
	rc, _ = resolve(t, ns, "127.0.0.1:53", dnsCanary+".exfil.example.")
	is.Equal(rc, dnsmessage.RCodeRefused)
	rc, again := resolve(t, ns, "192.0.2.53:53", "api.example.com.") // a hard-coded resolver gets the bridge's
	is.Equal(rc, dnsmessage.RCodeSuccess)
	is.Equal(again, addrs)

	auth := "Basic aW52OnRvaw==" // inv:tok
	got, err := exchange(t, ns, netip.AddrPortFrom(addrs[0], 443).String(), "\x16\x03\x01hello")
	is.NoErr(err)
	is.Equal(got, "\x16\x03\x01hello") // the peeked bytes went on first
	got, err = exchange(t, ns, "192.0.2.11:80", "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	is.NoErr(err)
	is.True(strings.HasPrefix(got, "GET / "))
	got, err = exchange(t, ns, "192.0.2.10:80", "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	is.NoErr(err)
	is.True(strings.HasPrefix(got, "HTTP/1.1 403 Forbidden")) // egressd's refusal reaches the HTTP client
	is.True(strings.Contains(got, "egress.policy_denied"))
	got, err = exchange(t, ns, "[2001:db8::7]:22", "SSH-2.0-x\r\n")
	is.NoErr(err)
	is.Equal(got, "SSH-2.0-x\r\n")
	_, err = exchange(t, ns, "198.18.200.1:443", "\x16\x03\x01")
	is.True(err != nil) // reset: no name holds that address

	want := []string{
		"api.example.com:443 tls " + auth,
		"192.0.2.11:80 http " + auth,
		"192.0.2.10:80 http " + auth,
		"[2001:db8::7]:22 other " + auth,
	}
	is.Equal(fp.seen(), want)

	// UDP outside :53 is dropped and counted; nothing answers.
	before, err := e.UDPDropped()
	is.NoErr(err)
	inNS(t, ns, func() error {
		c, err := net.Dial("udp", "192.0.2.10:9999")
		if err != nil {
			return err
		}
		defer c.Close()
		c.Write([]byte("datagram"))
		return nil
	})
	after, err := e.UDPDropped()
	is.NoErr(err)
	is.True(after > before)

	// Loopback is the namespace's own: not redirected.
	inNS(t, ns, func() error {
		l, err := net.Listen("tcp", "127.0.0.1:8080")
		if err != nil {
			return err
		}
		go func() {
			c, err := l.Accept()
			if err == nil {
				io.WriteString(c, "local")
				c.Close()
			}
			l.Close()
		}()
		return nil
	})
	got, err = exchange(t, ns, "127.0.0.1:8080", "")
	is.NoErr(err)
	is.Equal(got, "local")
	is.Equal(len(fp.seen()), len(want))
}

// TestTransparentEgressNoOrigins: a policy with no allowed origin still
// gives a working namespace: every name is REFUSED and nothing is given
// an address.
func TestTransparentEgressNoOrigins(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	is := is.New(t)
	ns, err := New()
	is.NoErr(err)
	defer ns.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, _, err := ns.TransparentEgress(ctx, EgressConfig{ProxySocket: "/nonexistent/proxy.sock", Log: slog.New(slog.DiscardHandler)})
	is.NoErr(err)
	rc, _ := resolve(t, ns, "127.0.0.1:53", "api.example.com.")
	is.Equal(rc, dnsmessage.RCodeRefused)
	is.Equal(e.Names.Len(), 0)
	_, err = exchange(t, ns, "192.0.2.1:443", "\x16\x03\x01")
	is.True(err != nil) // the proxy socket is absent: reset, no other route
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, mode string
		done           bool
	}{
		{"empty", "", egressdapi.TransparentOther, false},
		{"tls", "\x16\x03\x01", egressdapi.TransparentTLS, true},
		{"tls one byte", "\x16", egressdapi.TransparentOther, false},
		{"not tls", "\x16\x01", egressdapi.TransparentOther, true},
		{"get", "GET /", egressdapi.TransparentHTTP, true},
		{"post partial", "PO", egressdapi.TransparentOther, false},
		{"options", "OPTIONS ", egressdapi.TransparentHTTP, true},
		{"get without space", "GETX", egressdapi.TransparentOther, true},
		{"ssh", "SSH-2.0", egressdapi.TransparentOther, true},
		{"h2c preface", "PRI * HTTP/2.0", egressdapi.TransparentOther, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			mode, done := classify([]byte(tc.in))
			is.Equal(mode, tc.mode)
			is.Equal(done, tc.done)
		})
	}
}
