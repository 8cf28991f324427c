package pipeline

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// TestCompressedResponses: gzip is decoded and scanned; a coding egressd
// cannot decode is refused.
func TestCompressedResponses(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := &upstream{handler: func(w http.ResponseWriter, r *http.Request, s seen) {
		if r.URL.Path == "/br" {
			w.Header().Set("Content-Encoding", "br")
			io.WriteString(w, "opaque")
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, "echo "+strings.TrimPrefix(s.Header.Get("Authorization"), "Bearer "))
		zw.Close()
	}}
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease(base, "header:Authorization", "Bearer {}")})
	out, err := f.do(Input{URL: base + "/gz"})
	is.NoErr(err)
	is.Equal(string(out.Body), "echo "+redact.Redacted)
	_, err = f.do(Input{URL: base + "/br"})
	is.Equal(wire.CodeOf(err), egressdapi.CodeResponseUndecodable)
}

// TestRequestRefusals: the validation step's refusals reach the caller
// through the whole pipeline, with nothing sent.
func TestRequestRefusals(t *testing.T) {
	t.Parallel()
	up := &upstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease(base, "header:Authorization", "Bearer {}")})
	for _, tc := range []struct {
		name string
		in   Input
		code string
	}{
		{"crlf in host", Input{URL: base + "/", Header: hdr("Host", "127.0.0.1\r\nX-Evil: 1")}, egressdapi.CodeHeaderInvalid},
		{"cl+te", Input{Method: "POST", URL: base + "/", Body: []byte("ab"), Header: hdr("Content-Length", "2", "Transfer-Encoding", "chunked")}, egressdapi.CodeHeaderInvalid},
		{"trace", Input{Method: "TRACE", URL: base + "/"}, egressdapi.CodeMethodForbidden},
		{"userinfo", Input{URL: "http://user:pw@127.0.0.1:" + strconv.Itoa(port(srv)) + "/"}, egressdapi.CodeInvalidRequest},
		{"unknown invocation", Input{Invocation: "nobody", URL: base + "/"}, egressdapi.CodeBundleUnknown},
		{"policy", Input{URL: "https://not-allowed.test/"}, egressdapi.CodePolicyDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.do(tc.in)
			is.New(t).Equal(wire.CodeOf(err), tc.code)
		})
	}
	is.New(t).Equal(len(up.requests()), 0)
}

// TestCRLFInInjectedValue: a value that would split a header is refused.
func TestCRLFInInjectedValue(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := &upstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
	f := newFixture(t, fixtureConfig{})
	l := lease(base, "header:X-Key", "{}")
	l.Value = []byte(canary + "\r\nX-Injected: 1")
	f.register("inv", []secretdapi.Lease{l})
	_, err := f.do(Input{URL: base + "/"})
	is.Equal(wire.CodeOf(err), egressdapi.CodeHeaderInvalid)
	is.Equal(len(up.requests()), 0)
}

// TestPrivateNameRefused: a name that resolves to a private address is
// refused (only the static host map can name one).
func TestPrivateNameRefused(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t, fixtureConfig{resolver: fakeResolver{"intranet.test": {netip.MustParseAddr("10.1.2.3")}, "meta.test": {netip.MustParseAddr("169.254.169.254")}}})
	f.register("inv", nil, "https://intranet.test", "https://meta.test")
	for _, u := range []string{"https://intranet.test/", "https://meta.test/latest/meta-data/"} {
		_, err := f.do(Input{URL: u})
		is.Equal(wire.CodeOf(err), egressdapi.CodeAddressForbidden)
	}
	is.Equal(len(f.dialled), 0)
}

type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return r[host], nil
}

// TestDroppedBundle: after a drop the invocation reaches nothing.
func TestDroppedBundle(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := &upstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease(base, "header:Authorization", "Bearer {}")})
	is.NoErr(f.reg.Drop("inv"))
	_, err := f.do(Input{URL: base + "/"})
	is.Equal(wire.CodeOf(err), egressdapi.CodeBundleUnknown)
	is.True(!f.reg.Holds([]byte(canary)))
	is.Equal(len(up.requests()), 0)
}

// TestByteAccounting: a 10,000-byte body and a 1 MiB response count about
// 10,000 bytes: outbound only.
func TestByteAccounting(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	big := strings.Repeat("r", 1<<20)
	up := &upstream{handler: func(w http.ResponseWriter, _ *http.Request, _ seen) { io.WriteString(w, big) }}
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
	f := newFixture(t, fixtureConfig{})
	f.register("inv", nil, base)
	out, err := f.do(Input{Method: "POST", URL: base + "/upload", Body: []byte(strings.Repeat("b", 10000))})
	is.NoErr(err)
	is.Equal(len(out.Body), 1<<20)
	st, err := f.reg.Stats("inv")
	is.NoErr(err)
	n := st[0].NetworkEgressBytes
	is.True(n >= 10000 && n < 10400) // body plus request line and headers
	is.Equal(st[0].Requests, uint64(1))
}

// TestResponseTooLarge: a response over the cap is refused.
func TestResponseTooLarge(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := &upstream{handler: func(w http.ResponseWriter, _ *http.Request, _ seen) { io.WriteString(w, strings.Repeat("x", 2048)) }}
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
	f := newFixture(t, fixtureConfig{maxResp: 1024})
	f.register("inv", nil, base)
	_, err := f.do(Input{URL: base + "/"})
	is.Equal(wire.CodeOf(err), egressdapi.CodeResponseTooLarge)
}

// TestHeadResponse: the answer to HEAD has no body, whatever its
// Content-Length announces (it was refused as an unreadable body).
func TestHeadResponse(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := &upstream{handler: func(w http.ResponseWriter, r *http.Request, s seen) {
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "hello")
	}}
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease(base, "header:Authorization", "Bearer {}")})
	for range 2 {
		out, err := f.do(Input{Method: "HEAD", URL: base + "/x"})
		is.NoErr(err)
		is.Equal(out.Status, http.StatusOK)
		is.Equal(len(out.Body), 0)
		out, err = f.do(Input{URL: base + "/x"})
		is.NoErr(err)
		is.Equal(string(out.Body), "hello")
	}
}

// TestAppendCaseMatchesStrings: the allocation-free case mapping of
// heldInName is strings.ToLower and strings.ToUpper.
func TestAppendCaseMatchesStrings(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for _, k := range []string{"Content-Type", "X-Hkp_abc", "ÄÖü-ß", "\xff\xfeX", "", strings.Repeat("Ab", 100)} {
		is.Equal(string(appendCase(nil, k, unicode.ToLower)), strings.ToLower(k))
		is.Equal(string(appendCase(nil, k, unicode.ToUpper)), strings.ToUpper(k))
	}
}

// TestContainsFold: the prefilter of knownPlaceholder finds "hkp_" in any
// case and position.
func TestContainsFold(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for s, want := range map[string]bool{"hkp_": true, "xHKP_y": true, "Hkp_": true, "hkp": false, "": false, "hk p_": false, "a hkP_": true} {
		is.Equal(containsFold(s, "hkp_"), want) // s
	}
}
