package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestParseResolve(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	m := HostMap{}
	is.NoErr(m.ParseResolve("API.test:8443:127.0.0.1"))
	is.NoErr(m.ParseResolve("[::1]:443:[::1]"))
	is.NoErr(m.ParseResolve("v6.test:443:::1"))
	is.Equal(m["api.test:8443"], netip.MustParseAddr("127.0.0.1"))
	is.Equal(m["[::1]:443"], netip.MustParseAddr("::1"))
	is.Equal(m["v6.test:443"], netip.MustParseAddr("::1"))
	for _, bad := range []string{"api.test:127.0.0.1", "api.test:0:127.0.0.1", "api.test:80:nope", "a_b:80:127.0.0.1", "[::1:443:::1"} {
		is.True(m.ParseResolve(bad) != nil) // bad
	}
}

func TestRoute(t *testing.T) {
	t.Parallel()
	tr := New(Config{
		HostMap:   HostMap{"api.test:443": netip.MustParseAddr("127.0.0.1"), "meta.test:80": netip.MustParseAddr("169.254.169.254")},
		Forbidden: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:4750")},
		Resolver: fakeResolver{
			"public.test":  addrs("8.8.8.8"),
			"mapped.test":  addrs("::ffff:8.8.4.4"),
			"private.test": addrs("10.0.0.5"),
			"hosts.test":   addrs("127.0.0.1"),
			"mixed.test":   addrs("192.168.1.1", "1.1.1.1"),
			"meta.test":    addrs("169.254.169.254"),
			"cgnat.test":   addrs("100.64.0.1"),
			"ula.test":     addrs("fd00:ec2::254"),
			"nat64.test":   addrs("64:ff9b::7f00:1"),
			"link.test":    addrs("fe80::1"),
		},
	})
	for _, tc := range []struct {
		host string
		port uint16
		want string
		code string
	}{
		{"api.test", 443, "127.0.0.1:443", ""},
		{"meta.test", 80, "169.254.169.254:80", ""}, // the operator mapped it
		{"localhost", 8080, "127.0.0.1:8080", ""},
		{"127.0.0.2", 80, "127.0.0.2:80", ""},
		{"[::1]", 80, "[::1]:80", ""},
		{"public.test", 443, "8.8.8.8:443", ""},
		{"mapped.test", 443, "8.8.4.4:443", ""},
		{"mixed.test", 443, "1.1.1.1:443", ""},
		{"private.test", 443, "", egressdapi.CodeAddressForbidden},
		{"hosts.test", 443, "", egressdapi.CodeAddressForbidden}, // a name that resolves to loopback
		{"meta.test", 443, "", egressdapi.CodeAddressForbidden},
		{"cgnat.test", 443, "", egressdapi.CodeAddressForbidden},
		{"ula.test", 443, "", egressdapi.CodeAddressForbidden},
		{"nat64.test", 443, "", egressdapi.CodeAddressForbidden},
		{"link.test", 443, "", egressdapi.CodeAddressForbidden},
		{"10.1.2.3", 443, "", egressdapi.CodeAddressForbidden},
		{"169.254.169.254", 80, "", egressdapi.CodeAddressForbidden},
		{"[::ffff:127.0.0.1]", 80, "", egressdapi.CodeAddressForbidden},
		{"127.0.0.1", 4750, "", egressdapi.CodeAddressForbidden}, // egressd itself
		{"unknown.test", 443, "", egressdapi.CodeUpstreamError},
	} {
		r, err := tr.Route(context.Background(), tc.host, tc.port)
		is := is.New(t)
		is.Equal(wire.CodeOf(err), tc.code) // tc.host
		if tc.code == "" {
			is.Equal(r.Addr.String(), tc.want)
		}
	}
}

// TestDialsOnlyTheCheckedAddress sends a request whose URL names server B
// through a pool checked for server A: A receives it, B never does, and
// every socket connected to A's address.
func TestDialsOnlyTheCheckedAddress(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var hitsA, hitsB int
	var mu sync.Mutex
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mu.Lock(); hitsA++; mu.Unlock() }))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mu.Lock(); hitsB++; mu.Unlock() }))
	defer b.Close()
	checked := netip.MustParseAddrPort(a.Listener.Addr().String())
	var dialled []netip.AddrPort
	tr := New(Config{OnDial: func(ap netip.AddrPort) { mu.Lock(); dialled = append(dialled, ap); mu.Unlock() }})
	defer tr.Close()
	u, _ := url.Parse(b.URL + "/x")
	for range 3 {
		resp, err := tr.RoundTrip(&http.Request{Method: "GET", URL: u, Header: http.Header{}, Host: u.Host}, "http://"+u.Host, Route{Addr: checked})
		is.NoErr(err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	is.Equal(hitsA, 3)
	is.Equal(hitsB, 0)
	is.True(len(dialled) >= 1)
	for _, d := range dialled {
		is.Equal(d, checked)
	}
}

func TestTLSVerifiedAndNoRedirects(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ca := egresstest.NewCA(t)
	srv := ca.TLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "https://elsewhere.test/", http.StatusFound)
			return
		}
		io.WriteString(w, r.Proto)
	}), "api.test")
	addr := netip.MustParseAddrPort(srv.Listener.Addr().String())
	send := func(tr *Transport, path string) (*http.Response, error) {
		u := &url.URL{Scheme: "https", Host: "api.test:" + itoa(addr.Port()), Path: path}
		return tr.RoundTrip(&http.Request{Method: "GET", URL: u, Header: http.Header{}, Host: u.Host}, "https://"+u.Host, Route{Addr: addr})
	}
	good := New(Config{RootCAs: ca.Pool})
	defer good.Close()
	resp, err := send(good, "/")
	is.NoErr(err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.Equal(string(body), "HTTP/2.0")
	resp, err = send(good, "/redirect")
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, http.StatusFound)
	is.Equal(resp.Header.Get("Location"), "https://elsewhere.test/")

	other := egresstest.NewCA(t)
	bad := New(Config{RootCAs: other.Pool})
	defer bad.Close()
	_, err = send(bad, "/")
	is.Equal(wire.CodeOf(err), egressdapi.CodeUpstreamError)
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
