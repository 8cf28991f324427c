package pipeline

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/wire"
)

func basicHdr(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// userCanary is a value that can be a Basic user-id (no ':').
const userCanary = "usercanary-Zq8v1X-value+7d1e"

// TestBasicPlacements: a Basic half is placed only when the one
// Authorization field, canonical Basic, toward the credential's
// destination over https, holds the placeholder exactly in the
// credential's half; the substituted field is the pair encoded again with
// the value (and the credential's fixed user-id). Anything else holding a
// placeholder is egress.placeholder_misuse, whatever hides it in the
// Basic value; a Basic value without a placeholder passes untouched.
func TestBasicPlacements(t *testing.T) {
	t.Parallel()
	const base = "https://api.test"
	const ph2 = "hkp_bcdefghijklmnopqrstuvwxyz2345672"
	const phOther = "hkp_cdefghijklmnopqrstuvwxyz23456723" // another invocation's
	pw := lease(base, "basic:password", "")
	fixed := lease(base, "basic:password", "")
	fixed.BasicUser = "x-access-token"
	user := secretdapi.Lease{Credential: "u", Destination: base, Placeholder: ph2, Target: "basic:user", Value: []byte(userCanary)}
	b64 := base64.StdEncoding.EncodeToString
	for _, tc := range []struct {
		name   string
		leases []secretdapi.Lease
		url    string
		header []string
		code   string // "" = placed or passed
		attach int
		want   string // the Authorization sent, when placed
	}{
		{"password placed", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr("alice", ph)}, "", 1, basicHdr("alice", canary)},
		{"scheme in lower case", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", "basic " + b64([]byte("alice:"+ph))}, "", 1, basicHdr("alice", canary)},
		{"empty user passes", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr("", ph)}, "", 1, basicHdr("", canary)},
		{"fixed user wins", []secretdapi.Lease{fixed}, base + "/x", []string{"Authorization", basicHdr("alice", ph)}, "", 1, basicHdr("x-access-token", canary)},
		{"user placed", []secretdapi.Lease{user}, base + "/x", []string{"Authorization", basicHdr(ph2, "x-oauth-basic")}, "", 1, basicHdr(userCanary, "x-oauth-basic")},
		{"both halves placed", []secretdapi.Lease{pw, user}, base + "/x", []string{"Authorization", basicHdr(ph2, ph)}, "", 2, basicHdr(userCanary, canary)},
		{"no placeholder passes", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr("alice", "own-password")}, "", 0, basicHdr("alice", "own-password")},
		{"malformed without a placeholder passes", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", "Basic !!not-base64"}, "", 0, "Basic !!not-base64"},

		{"another origin", []secretdapi.Lease{pw}, "https://other.test/x", []string{"Authorization", basicHdr("alice", ph)}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"plain http", []secretdapi.Lease{pw}, "http://api.test/x", []string{"Authorization", basicHdr("alice", ph)}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"the user half", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr(ph, "pw")}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"both halves, one credential", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr(ph, ph)}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"the password half of a user credential", []secretdapi.Lease{user}, base + "/x", []string{"Authorization", basicHdr("alice", ph2)}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"partial match, suffix", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr("alice", ph+"x")}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"partial match, prefix", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr("alice", "x"+ph)}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"percent-encoded", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr("alice", strings.Replace(ph, "_", "%5F", 1))}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"upper case", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr("alice", strings.ToUpper(ph))}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"unpadded", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", "Basic " + strings.TrimRight(b64([]byte("bob:"+ph)), "=")}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"url-safe alphabet", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", "Basic " + base64.URLEncoding.EncodeToString([]byte("a?>:"+ph))}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"junk inside the base64", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", "Basic " + b64([]byte("alice:" + ph))[:8] + "*" + b64([]byte("alice:" + ph))[8:]}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"two Authorization fields", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr("alice", ph), "Authorization", basicHdr("alice", ph)}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"another header", []secretdapi.Lease{pw}, base + "/x", []string{"X-Auth", basicHdr("alice", ph)}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"placed, the other half another invocation's", []secretdapi.Lease{pw}, base + "/x", []string{"Authorization", basicHdr(phOther, ph)}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"placed, and in the query", []secretdapi.Lease{pw}, base + "/x?k=" + ph, []string{"Authorization", basicHdr("alice", ph)}, egressdapi.CodePlaceholderMisuse, 0, ""},
		{"a fixed user beside a user placement", []secretdapi.Lease{fixed, user}, base + "/x", []string{"Authorization", basicHdr(ph2, ph)}, egressdapi.CodeInjectionConflict, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			f := newFixture(t, fixtureConfig{})
			other := secretdapi.Lease{Credential: "o", Destination: "https://other.test", Placeholder: phOther, Target: "basic:password", Value: []byte("other-" + canary)}
			f.register("inv-other", []secretdapi.Lease{other})
			f.register("inv", tc.leases, "https://other.test")
			b, err := f.reg.Get("inv")
			is.NoErr(err)
			rec, err := f.p.Validate(Input{Method: "GET", URL: tc.url, Header: hdr(tc.header...)})
			is.NoErr(err)
			before := rec.Clone()
			attach, err := f.p.Placements(b, rec)
			is.Equal(rec.Header, before.Header) // the search works on a copy
			if tc.code != "" {
				is.Equal(wire.CodeOf(err), tc.code)
				f.outputs = append(f.outputs, err.Error())
				return
			}
			is.NoErr(err)
			is.Equal(len(attach), tc.attach)
			out, err := f.p.Substitute(b, rec, attach)
			is.NoErr(err)
			is.Equal(out.Header.Values("Authorization"), []string{tc.want})
		})
	}
}

// TestBasicScanProxyAuth: a placeholder (any invocation's) in a
// Proxy-Authorization field, as written or inside a Basic credential, is
// misuse; egressd's own proxy credential (invocation:token) is not.
func TestBasicScanProxyAuth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease("https://api.test", "basic:password", "")})
	for _, tc := range []struct {
		name, value string
		misuse      bool
	}{
		{"proxy token", basicHdr("inv", token), false},
		{"basic password", basicHdr("inv", ph), true},
		{"basic user", basicHdr(ph, token), true},
		{"unpadded", "Basic " + strings.TrimRight(base64.StdEncoding.EncodeToString([]byte("i:"+ph)), "="), true},
		{"raw", "Bearer " + ph, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := f.p.ScanProxyAuth(hdr("X-Other", ph+"-not-this-field", "proxy-authorization", tc.value))
			if tc.misuse {
				is.New(t).Equal(wire.CodeOf(err), egressdapi.CodePlaceholderMisuse)
			} else {
				is.New(t).NoErr(err)
			}
		})
	}
}

// TestBasicThroughPipeline: whole proxied requests over verified TLS. The
// destination gets the real password in a correct Basic encoding with the
// user the agent sent, or the credential's fixed user; every refusal
// (another origin, the user half, a partial match, a Proxy-Authorization
// field with the placeholder, a malformed encoding hiding it) sends
// nothing to either server and is audited with its code. The canary is
// in no log line, audit record, error or answer (the fixture's cleanup).
func TestBasicThroughPipeline(t *testing.T) {
	t.Parallel()
	ca := egresstest.NewCA(t)
	up, other := &upstream{}, &upstream{}
	srv, osrv := ca.TLSServer(t, up, "api.test"), ca.TLSServer(t, other, "other.test")
	p, op := strconv.Itoa(port(srv)), strconv.Itoa(port(osrv))
	hm := transport.HostMap{}
	is.New(t).NoErr(hm.ParseResolve("api.test:" + p + ":127.0.0.1"))
	is.New(t).NoErr(hm.ParseResolve("other.test:" + op + ":127.0.0.1"))
	f := newFixture(t, fixtureConfig{hostMap: hm, ca: ca.PEM})
	base, obase := "https://api.test:"+p, "https://other.test:"+op
	pw := lease(base, "basic:password", "")
	f.register("inv", []secretdapi.Lease{pw}, obase)
	fx := lease(base, "basic:password", "")
	fx.Placeholder, fx.BasicUser = "hkp_bcdefghijklmnopqrstuvwxyz2345672", "x-access-token"
	f.register("inv-fixed", []secretdapi.Lease{fx})

	is := is.New(t)
	is.True(strings.HasSuffix(base64.StdEncoding.EncodeToString([]byte("bob:"+ph)), "=")) // so trimming it makes a malformed value
	out, err := f.do(Input{URL: base + "/repo.git/info/refs", Header: hdr("Authorization", basicHdr("alice", ph)), Substitute: true})
	is.NoErr(err)
	is.Equal(out.Status, 200)
	got := up.requests()
	is.Equal(len(got), 1)
	u, pass, ok := (&http.Request{Header: got[0].Header}).BasicAuth()
	is.True(ok)
	is.Equal(u, "alice")
	is.Equal(pass, canary)
	is.Equal(got[0].Header.Get("Authorization"), basicHdr("alice", canary)) // canonical encoding

	_, err = f.do(Input{Invocation: "inv-fixed", URL: base + "/x", Header: hdr("Authorization", basicHdr("alice", fx.Placeholder)), Substitute: true})
	is.NoErr(err)
	got = up.requests()
	is.Equal(got[1].Header.Get("Authorization"), basicHdr("x-access-token", canary))

	for _, tc := range []struct {
		name string
		in   Input
	}{
		{"another origin", Input{URL: obase + "/x", Header: hdr("Authorization", basicHdr("alice", ph))}},
		{"the user half", Input{URL: base + "/x", Header: hdr("Authorization", basicHdr(ph, "pw"))}},
		{"a partial match", Input{URL: base + "/x", Header: hdr("Authorization", basicHdr("alice", ph+"0"))}},
		{"proxy-authorization", Input{URL: base + "/x", Header: hdr("Authorization", basicHdr("alice", ph), "Proxy-Authorization", basicHdr("alice", ph))}},
		{"malformed base64", Input{URL: base + "/x", Header: hdr("Authorization", "Basic "+strings.TrimRight(base64.StdEncoding.EncodeToString([]byte("bob:"+ph)), "="))}},
	} {
		tc.in.Substitute = true
		_, err := f.do(tc.in)
		is.Equal(wire.CodeOf(err), egressdapi.CodePlaceholderMisuse) // tc.name
	}
	// The raw value inside a Basic credential, toward any origin, is
	// found by the outbound scan (base64 at any alignment).
	for _, u := range []string{base, obase} {
		for _, user := range []string{"alice", "bob", "dave"} { // each alignment (6, 4, 5 bytes before it) of the value in the base64
			_, err := f.do(Input{URL: u + "/x", Header: hdr("Authorization", basicHdr(user, canary)), Substitute: true})
			is.Equal(wire.CodeOf(err), egressdapi.CodeSecretInRequest)
		}
	}
	is.Equal(len(up.requests()), 2)
	is.Equal(len(other.requests()), 0)
	is.Equal(strings.Count(f.auditText(), `"code":"egress.placeholder_misuse"`), 5)
}

// auditText is the fixture's audit log.
func (f *fixture) auditText() string {
	b, _ := os.ReadFile(filepath.Join(f.auditDir, audit.DefaultName))
	return string(b)
}
