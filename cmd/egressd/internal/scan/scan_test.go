package scan

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

const canary = "canary/Zq8v1+sec ret"

func scanner() Scanner {
	sc := redact.NewScrubber()
	sc.Register([]byte(canary))
	return Scanner{Scrubber: sc, Holds: func(b []byte) bool { return string(b) == canary }}
}

func rec(t *testing.T, u string, body string, h ...string) *request.Record {
	t.Helper()
	var f []request.Field
	for i := 0; i < len(h); i += 2 {
		f = append(f, request.Field{Name: h[i], Value: h[i+1]})
	}
	r, err := request.Parse("POST", u, f, []byte(body), request.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDecodedForms(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.Equal(DecodedForms("a%252541"), []string{"a%252541", "a%2541", "a%41", "aA"})
	is.Equal(len(DecodedForms("%2525252525252541")), 1+MaxDecodeRounds)
	is.Equal(DecodedForms("plain"), []string{"plain"})
}

func TestRequestFindsSmuggledValue(t *testing.T) {
	t.Parallel()
	q := url.QueryEscape(canary)
	for _, tc := range []struct {
		name, url, body string
		hdr             []string
	}{
		{name: "query raw-encoded", url: "https://other.test/?x=" + q},
		{name: "query double-encoded", url: "https://other.test/?x=" + url.QueryEscape(q)},
		{name: "query triple-encoded", url: "https://other.test/?x=" + url.QueryEscape(url.QueryEscape(q))},
		{name: "path", url: "https://other.test/" + url.PathEscape(canary)},
		{name: "query base64", url: "https://other.test/?x=" + base64.RawURLEncoding.EncodeToString([]byte(canary))},
		{name: "query hex", url: "https://other.test/?x=" + hex.EncodeToString([]byte(canary))},
		{name: "header", url: "https://other.test/", hdr: []string{"X-Note", "prefix " + canary}},
		{name: "header basic", url: "https://other.test/", hdr: []string{"X-Auth", "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+canary))}},
		{name: "body", url: "https://other.test/", body: `{"k":"` + canary + `"}`},
		{name: "body base64", url: "https://other.test/", body: base64.StdEncoding.EncodeToString([]byte(canary))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := scanner().Request(rec(t, tc.url, tc.body, tc.hdr...))
			is.New(t).Equal(wire.CodeOf(err), egressdapi.CodeSecretInRequest)
		})
	}
}

func TestRequestCleanPasses(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.NoErr(scanner().Request(rec(t, "https://api.test/a?b=c%2541", `{"k":"v"}`, "Authorization", "Bearer hkp_abc")))
	is.NoErr(Scanner{Scrubber: redact.NewScrubber()}.Request(rec(t, "https://api.test/?x="+url.QueryEscape(canary), "")))
}

func TestManual(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url, body string
		hdr             []string
	}{
		{name: "bearer", url: "https://api.test/", hdr: []string{"Authorization", "Bearer " + "x"}},
		{name: "query", url: "https://api.test/?key=" + url.QueryEscape(canary)},
		{name: "body", url: "https://api.test/", body: canary},
		{name: "cookie token", url: "https://api.test/", hdr: []string{"Cookie", "a=1; sid=x; b=2"}},
		{name: "list token", url: "https://api.test/", hdr: []string{"X-List", "one,, x,two"}},
		{name: "last token", url: "https://api.test/", hdr: []string{"X-List", "one ;x"}},
		{name: "path segment", url: "https://api.test/a/x/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := scanner()
			s.Holds = func(b []byte) bool { return string(b) == canary || string(b) == "x" }
			err := s.Manual(rec(t, tc.url, tc.body, tc.hdr...))
			is.New(t).Equal(wire.CodeOf(err), egressdapi.CodeManualCredential)
		})
	}
	is.New(t).NoErr(scanner().Manual(rec(t, "https://api.test/a?b=c", "{}", "Accept", "*/*")))
	s := scanner()
	s.Holds = func(b []byte) bool { return string(b) == "x" }
	is.New(t).NoErr(s.Manual(rec(t, "https://api.test/a", "", "X-List", "ax ,;xb; y=xx"))) // only parts of tokens
}

// TestHostForms: a held value in a host name or authority, in each form a
// name can carry, is egress.secret_in_request; a clean name, or one
// holding only part of the value, is not.
func TestHostForms(t *testing.T) {
	t.Parallel()
	s := scanner()
	h := hex.EncodeToString([]byte(canary))
	b32 := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte(canary)))
	for _, tc := range []struct {
		name, host string
		want       bool
	}{
		{"hex", h + ".example.com", true},
		{"hex over labels", h[:20] + "." + h[20:] + ".example.com:443", true},
		{"base32, lowercased", b32 + ".example.com", true},
		{"base64url, lowercased", strings.ToLower(base64.RawURLEncoding.EncodeToString([]byte(canary))) + ".example.com", true},
		{"percent-encoded (a Host field)", url.PathEscape(canary) + ".example.com", true},
		{"clean", "api.example.com:8443", false},
		{"hex of part of the value", h[:len(h)-2] + ".example.com", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			err := s.Host(tc.host)
			if !tc.want {
				is.NoErr(err)
				return
			}
			is.Equal(wire.CodeOf(err), egressdapi.CodeSecretInRequest)
			is.True(!strings.Contains(err.Error(), h)) // the message names nothing
		})
	}
}

// TestRequestSpacedForms: a header value or a body holding the value as
// separated hex or with invisible characters inserted is refused; the
// same text past the bounds is not.
func TestRequestSpacedForms(t *testing.T) {
	t.Parallel()
	h := hex.EncodeToString([]byte(canary))
	var pairs []string
	for i := 0; i < len(h); i += 2 {
		pairs = append(pairs, h[i:i+2])
	}
	zw := func(gap string) string {
		var b strings.Builder
		for i, r := range canary {
			if i > 0 {
				b.WriteString(gap)
			}
			b.WriteRune(r)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, body string
		hdr        []string
		want       bool
	}{
		{"separated hex in a header", "", []string{"X-Dump", strings.Join(pairs, ":")}, true},
		{"separated hex in the body", strings.ToUpper(strings.Join(pairs, " ")), nil, true},
		{"zero-width spaces in the body", zw("\u200b\u200b"), nil, true},
		{"four separators: past the bound", strings.Join(pairs, "::::"), nil, false},
		{"three zero-width spaces: past the bound", zw("\u200b\u200b\u200b"), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			err := scanner().Request(rec(t, "https://other.test/", tc.body, tc.hdr...))
			if tc.want {
				is.Equal(wire.CodeOf(err), egressdapi.CodeSecretInRequest)
			} else {
				is.NoErr(err)
			}
		})
	}
}
