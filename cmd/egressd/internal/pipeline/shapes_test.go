package pipeline

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/wire"
)

// seen is what an upstream received.
type seen struct {
	Host   string
	Path   string // as sent (escaped)
	Query  url.Values
	Header http.Header
	Body   []byte
}

// upstream records requests and answers with handler (default "ok").
type upstream struct {
	mu      sync.Mutex
	got     []seen
	handler func(w http.ResponseWriter, r *http.Request, s seen)
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s := seen{Host: r.Host, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	u.mu.Lock()
	u.got = append(u.got, s)
	u.mu.Unlock()
	if u.handler != nil {
		u.handler(w, r, s)
		return
	}
	io.WriteString(w, "ok")
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.got...)
}

func port(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }

type shape struct {
	name, target, template, path, body string
	value                              func(s seen) string
}

var shapes = []shape{
	{"header", "header:Authorization", "Bearer {}", "/v1/x", "", func(s seen) string {
		return strings.TrimPrefix(s.Header.Get("Authorization"), "Bearer ")
	}},
	{"query", "query:api_key", "", "/v1/x?a=1", "", func(s seen) string { return s.Query.Get("api_key") }},
	{"path", "path:token", "", "/v1/{token}/x", "", func(s seen) string {
		parts := strings.Split(s.Path, "/")
		if len(parts) < 3 {
			return ""
		}
		v, _ := url.PathUnescape(parts[2])
		return v
	}},
	{"body", "body:/auth/key", "", "/v1/x", `{"auth":{},"n":1}`, func(s seen) string {
		var v struct{ Auth struct{ Key string } }
		_ = json.Unmarshal(s.Body, &v)
		return v.Auth.Key
	}},
	{"basic password", "basic:password", "", "/v1/x", "", func(s seen) string {
		_, pw, _ := (&http.Request{Header: s.Header}).BasicAuth() // the canary's ':' stays in the password
		return pw
	}},
}

func (sh shape) input(base string) Input {
	return Input{Method: "POST", URL: base + sh.path, Body: []byte(sh.body), Header: hdr("Content-Type", "application/json")}
}

// TestShapesLoopbackHTTP: each target shape is attached over plain http to
// a literal loopback host, and the upstream gets the value.
func TestShapesLoopbackHTTP(t *testing.T) {
	t.Parallel()
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			up := &upstream{}
			srv := httptest.NewServer(up)
			defer srv.Close()
			f := newFixture(t, fixtureConfig{})
			base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
			f.register("inv", []secretdapi.Lease{lease(base, sh.target, sh.template)})
			out, err := f.do(sh.input(base))
			is.NoErr(err)
			is.Equal(out.Status, 200)
			got := up.requests()
			is.Equal(len(got), 1)
			is.Equal(sh.value(got[0]), canary)
			is.Equal(got[0].Header.Get("Accept-Encoding"), "identity")
		})
	}
}

// TestShapesHTTPS: each shape is attached over verified TLS to a name the
// static host map gives to a loopback test server.
func TestShapesHTTPS(t *testing.T) {
	t.Parallel()
	ca := egresstest.NewCA(t)
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			up := &upstream{}
			srv := ca.TLSServer(t, up, "api.test")
			p := port(srv)
			hm := transport.HostMap{}
			is.NoErr(hm.ParseResolve("api.test:" + strconv.Itoa(p) + ":127.0.0.1"))
			f := newFixture(t, fixtureConfig{hostMap: hm, ca: ca.PEM})
			base := "https://api.test:" + strconv.Itoa(p)
			f.register("inv", []secretdapi.Lease{lease(base, sh.target, sh.template)})
			out, err := f.do(sh.input(base))
			is.NoErr(err)
			is.Equal(out.Status, 200)
			got := up.requests()
			is.Equal(len(got), 1)
			is.Equal(sh.value(got[0]), canary)
			is.Equal(got[0].Host, "api.test:"+strconv.Itoa(p))
			for _, d := range f.dialled {
				is.Equal(d, netip.MustParseAddrPort("127.0.0.1:"+strconv.Itoa(p)))
			}
		})
	}
}

// TestShapesPlaintextRefused: the same credential host over plain http is
// refused before anything is sent, for each shape.
func TestShapesPlaintextRefused(t *testing.T) {
	t.Parallel()
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			up := &upstream{}
			srv := httptest.NewServer(up)
			defer srv.Close()
			p := strconv.Itoa(port(srv))
			hm := transport.HostMap{}
			is.NoErr(hm.ParseResolve("api.test:" + p + ":127.0.0.1"))
			f := newFixture(t, fixtureConfig{hostMap: hm})
			f.register("inv", []secretdapi.Lease{lease("https://api.test:"+p, sh.target, sh.template)})
			_, err := f.do(sh.input("http://api.test:" + p))
			is.Equal(wire.CodeOf(err), egressdapi.CodePlaintextCredential)
			is.Equal(len(up.requests()), 0)
		})
	}
}
