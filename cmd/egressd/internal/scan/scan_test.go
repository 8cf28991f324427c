package scan

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
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
