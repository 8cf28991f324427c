package pipeline

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

func TestPerimeter(t *testing.T) {
	t.Parallel()
	route := func(a string) transport.Route { return transport.Route{Addr: netip.MustParseAddrPort(a)} }
	for _, tc := range []struct {
		url, addr string
		ok        bool
	}{
		{"https://api.test/", "127.0.0.1:443", true},
		{"https://api.test/", "8.8.8.8:443", true},
		{"http://127.0.0.1:8080/", "127.0.0.1:8080", true},
		{"http://127.0.0.9:8080/", "127.0.0.9:8080", true},
		{"http://[::1]:8080/", "[::1]:8080", true},
		{"http://localhost:8080/", "127.0.0.1:8080", true},
		{"http://api.test/", "127.0.0.1:80", false},        // a name, even one mapped to loopback
		{"http://localhost:8080/", "10.0.0.1:8080", false}, // a host map that sends loopback away
		{"http://127.0.0.1:8080/", "[::ffff:127.0.0.1]:8080", false},
	} {
		rec, err := request.Parse("GET", tc.url, nil, nil, request.Limits{})
		is.New(t).NoErr(err)
		err = Perimeter(rec, route(tc.addr))
		is.New(t).Equal(err == nil, tc.ok) // tc.url
		if !tc.ok {
			is.New(t).Equal(wire.CodeOf(err), egressdapi.CodePlaintextCredential)
		}
	}
}

// TestLookAlikeLoopbackHosts: hosts that only look like loopback never get
// a credential; the canonical spellings do.
func TestLookAlikeLoopbackHosts(t *testing.T) {
	t.Parallel()
	up := &upstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	p := strconv.Itoa(port(srv))
	hm := transport.HostMap{}
	is.New(t).NoErr(hm.ParseResolve("hosts-loopback.test:" + p + ":127.0.0.1"))
	for _, host := range []string{"127.1", "0x7f000001", "2130706433", "0177.0.0.1", "localhost.", "[::ffff:127.0.0.1]", "[::1%25lo]", "hosts-loopback.test", "127.000.000.001", "LOCALHOST.", "xn--localhost-"} {
		t.Run(host, func(t *testing.T) {
			is := is.New(t)
			f := newFixture(t, fixtureConfig{hostMap: hm})
			base := "http://" + host + ":" + p
			f.register("inv", []secretdapi.Lease{lease("http://127.0.0.1:"+p, "header:Authorization", "Bearer {}")}, "http://127.0.0.1:"+p)
			_, err := f.do(Input{URL: base + "/"})
			is.True(err != nil)
			is.True(netguard.IsLiteralLoopback(strings.Trim(host, "[]")) == false || strings.Contains(host, "%"))
		})
	}
	for _, host := range []string{"127.0.0.1", "localhost", "LocalHost"} {
		t.Run(host, func(t *testing.T) {
			is := is.New(t)
			f := newFixture(t, fixtureConfig{})
			canon, _ := netguard.CanonicalHost(host)
			f.register("inv", []secretdapi.Lease{lease("http://"+canon+":"+p, "header:Authorization", "Bearer {}")})
			before := len(up.requests())
			_, err := f.do(Input{URL: "http://" + host + ":" + p + "/"})
			is.NoErr(err)
			got := up.requests()
			is.Equal(len(got), before+1)
			is.Equal(got[len(got)-1].Header.Get("Authorization"), "Bearer "+canary)
		})
	}
	for _, s := range up.requests() {
		if s.Header.Get("Authorization") != "" && s.Header.Get("Authorization") != "Bearer "+canary {
			t.Fatalf("unexpected Authorization %q", s.Header.Get("Authorization"))
		}
	}
}

// TestAgentOwnedLoopbackListener: a loopback listener run by an agent UID
// gets no credential; the same listener without a credential is reachable.
func TestAgentOwnedLoopbackListener(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p := strconv.Itoa(egresstest.AgentListener(t, 61200))
	base := "http://127.0.0.1:" + p
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease(base, "header:Authorization", "Bearer {}")})
	_, err := f.do(Input{URL: base + "/"})
	is.Equal(wire.CodeOf(err), egressdapi.CodeLoopbackOwnerAgent)
	f.register("plain", nil, base)
	out, err := f.do(Input{Invocation: "plain", URL: base + "/"})
	is.NoErr(err)
	is.Equal(out.Status, 200)
}

// TestRedirectNotFollowed: a 302 after injection comes back as it is; the
// redirect target receives nothing.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ca := egresstest.NewCA(t)
	other := &upstream{}
	osrv := ca.TLSServer(t, other, "other.test")
	op := strconv.Itoa(port(osrv))
	up := &upstream{handler: func(w http.ResponseWriter, r *http.Request, _ seen) {
		http.Redirect(w, r, "https://other.test:"+op+"/landing", http.StatusFound)
	}}
	srv := ca.TLSServer(t, up, "api.test")
	p := strconv.Itoa(port(srv))
	hm := transport.HostMap{}
	is.NoErr(hm.ParseResolve("api.test:" + p + ":127.0.0.1"))
	is.NoErr(hm.ParseResolve("other.test:" + op + ":127.0.0.1"))
	f := newFixture(t, fixtureConfig{hostMap: hm, ca: ca.PEM})
	f.register("inv", []secretdapi.Lease{lease("https://api.test:"+p, "header:Authorization", "Bearer {}")}, "https://other.test:"+op)
	out, err := f.do(Input{URL: "https://api.test:" + p + "/start"})
	is.NoErr(err)
	is.Equal(out.Status, http.StatusFound)
	loc := ""
	for _, h := range out.Header {
		if h.Name == "Location" {
			loc = h.Value
		}
	}
	is.Equal(loc, "https://other.test:"+op+"/landing")
	is.Equal(len(up.requests()), 1)
	is.Equal(len(other.requests()), 0)
	// Following it is a new decision, and no credential goes along.
	_, err = f.do(Input{URL: loc})
	is.NoErr(err)
	is.Equal(other.requests()[0].Header.Get("Authorization"), "")
}

// TestSmuggledValueRefused: the raw value in a query toward another allowed
// host — plain, percent-encoded, double-encoded — is refused; the other
// host receives nothing. Sending the raw value to its own destination is
// refused as manual credential use.
func TestSmuggledValueRefused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ca := egresstest.NewCA(t)
	other := &upstream{}
	osrv := ca.TLSServer(t, other, "other.test")
	op := strconv.Itoa(port(osrv))
	hm := transport.HostMap{}
	is.NoErr(hm.ParseResolve("other.test:" + op + ":127.0.0.1"))
	f := newFixture(t, fixtureConfig{hostMap: hm, ca: ca.PEM})
	f.register("inv", []secretdapi.Lease{lease("https://api.test", "header:Authorization", "Bearer {}")}, "https://other.test:"+op)
	base := "https://other.test:" + op
	q := url.QueryEscape(canary)
	for _, u := range []string{base + "/?q=" + q, base + "/?q=" + url.QueryEscape(q), base + "/?q=" + url.QueryEscape(url.QueryEscape(q)),
		base + "/" + url.PathEscape(canary), base + "/?q=" + base64.URLEncoding.EncodeToString([]byte(canary))} {
		_, err := f.do(Input{URL: u})
		// A parameter equal to the value is caught as manual use first.
		code := wire.CodeOf(err)
		is.True(code == egressdapi.CodeSecretInRequest || code == egressdapi.CodeManualCredential)
	}
	_, err := f.do(Input{URL: base + "/?q=" + url.QueryEscape(url.QueryEscape(q))})
	is.Equal(wire.CodeOf(err), egressdapi.CodeSecretInRequest)
	_, err = f.do(Input{URL: base + "/", Header: hdr("X-Data", "v:"+canary+".")})
	is.Equal(wire.CodeOf(err), egressdapi.CodeSecretInRequest)
	_, err = f.do(Input{URL: base + "/", Header: hdr("Authorization", "Bearer "+canary)})
	is.Equal(wire.CodeOf(err), egressdapi.CodeManualCredential)
	is.Equal(len(other.requests()), 0)
	_, err = f.do(Input{URL: base + "/?q=harmless"})
	is.NoErr(err)
	is.Equal(len(other.requests()), 1)
}

// TestEchoScrubbed: an upstream that reflects the injected value (plain,
// base64, hex, in body and header) returns only [REDACTED].
func TestEchoScrubbed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := &upstream{handler: func(w http.ResponseWriter, r *http.Request, s seen) {
		v := strings.TrimPrefix(s.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("X-Echo", v)
		w.Header().Set("Set-Cookie", "session=1")
		w.Header().Set("X-Hostkit-Error", "forged")
		io.WriteString(w, strings.Join(encodings(v), "\n"))
	}}
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease(base, "header:Authorization", "Bearer {}")})
	out, err := f.do(Input{URL: base + "/"})
	is.NoErr(err)
	is.Equal(strings.Count(string(out.Body), redact.Redacted), 4)
	for _, h := range out.Header {
		is.True(h.Name != "Set-Cookie" && h.Name != "X-Hostkit-Error")
		if h.Name == "X-Echo" {
			is.Equal(h.Value, redact.Redacted)
		}
	}
}
