package request

import (
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url, want, code string
	}{
		{name: "https default port", url: "HTTPS://API.Example.COM:443/a?b=c", want: "https://api.example.com/a?b=c"},
		{name: "explicit port", url: "https://api.test:8443", want: "https://api.test:8443/"},
		{name: "loopback http", url: "http://127.0.0.1:8080/x", want: "http://127.0.0.1:8080/x"},
		{name: "ipv6", url: "http://[0:0::1]:80/", want: "http://[::1]/"},
		{name: "idna", url: "https://Bücher.example/", want: "https://xn--bcher-kva.example/"},
		{name: "userinfo", url: "https://user:pw@api.test/", code: egressdapi.CodeInvalidRequest},
		{name: "userinfo no password", url: "https://user@api.test/", code: egressdapi.CodeInvalidRequest},
		{name: "fragment", url: "https://api.test/#x", code: egressdapi.CodeInvalidRequest},
		{name: "backslash", url: "https://api.test\\@evil.test/", code: egressdapi.CodeInvalidRequest},
		{name: "ftp", url: "ftp://api.test/", code: egressdapi.CodeInvalidRequest},
		{name: "relative", url: "/a/b", code: egressdapi.CodeInvalidRequest},
		{name: "crlf", url: "https://api.test/\r\nX: y", code: egressdapi.CodeInvalidRequest},
		{name: "space", url: "https://api.test/a b", code: egressdapi.CodeInvalidRequest},
		{name: "bad escape", url: "https://api.test/%zz", code: egressdapi.CodeInvalidRequest},
		{name: "port zero", url: "https://api.test:0/", code: egressdapi.CodeInvalidRequest},
		{name: "port too big", url: "https://api.test:65536/", code: egressdapi.CodeInvalidRequest},
		{name: "zone", url: "http://[::1%25lo]/", code: egressdapi.CodeInvalidRequest},
		{name: "numeric look-alike", url: "http://127.1/", code: egressdapi.CodeInvalidRequest},
		{name: "hex look-alike", url: "http://0x7f000001/", code: egressdapi.CodeInvalidRequest},
		{name: "trailing dot", url: "http://localhost./", code: egressdapi.CodeInvalidRequest},
		{name: "percent in host", url: "https://api%2etest/", code: egressdapi.CodeInvalidRequest},
		{name: "underscore", url: "https://a_b.test/", code: egressdapi.CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			rec, err := Parse("GET", tc.url, nil, nil, Limits{})
			if tc.code != "" {
				is.Equal(wire.CodeOf(err), tc.code)
				return
			}
			is.NoErr(err)
			is.Equal(rec.String(), tc.want)
			is.Equal(rec.URL().String(), tc.want)
		})
	}
}

func TestParseMethod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ method, code string }{
		{"GET", ""}, {"POST", ""}, {"PATCH", ""},
		{"TRACE", egressdapi.CodeMethodForbidden}, {"trace", egressdapi.CodeMethodForbidden},
		{"TRACK", egressdapi.CodeMethodForbidden}, {"CONNECT", egressdapi.CodeMethodForbidden},
		{"", egressdapi.CodeInvalidRequest}, {"GE T", egressdapi.CodeInvalidRequest},
		{"GET\r\n", egressdapi.CodeInvalidRequest},
	} {
		t.Run(tc.method, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tc.method, "https://api.test/", nil, nil, Limits{})
			is.New(t).Equal(wire.CodeOf(err), tc.code)
		})
	}
}

func TestParseHeaders(t *testing.T) {
	t.Parallel()
	f := func(kv ...string) []Field {
		var out []Field
		for i := 0; i < len(kv); i += 2 {
			out = append(out, Field{kv[i], kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		fields []Field
		body   string
		code   string
	}{
		{name: "plain", fields: f("Accept", "text/plain", "X-A", "1", "X-A", "2")},
		{name: "crlf in value", fields: f("X-A", "a\r\nInjected: 1"), code: egressdapi.CodeHeaderInvalid},
		{name: "lf in value", fields: f("X-A", "a\nb"), code: egressdapi.CodeHeaderInvalid},
		{name: "nul in value", fields: f("X-A", "a\x00b"), code: egressdapi.CodeHeaderInvalid},
		{name: "ctl in value", fields: f("X-A", "a\x01b"), code: egressdapi.CodeHeaderInvalid},
		{name: "bad name", fields: f("X A", "1"), code: egressdapi.CodeHeaderInvalid},
		{name: "crlf in name", fields: f("X-A\r\n", "1"), code: egressdapi.CodeHeaderInvalid},
		{name: "crlf in host", fields: f("Host", "api.test\r\nX: 1"), code: egressdapi.CodeHeaderInvalid},
		{name: "other host", fields: f("Host", "evil.test"), code: egressdapi.CodeHeaderInvalid},
		{name: "same host", fields: f("Host", "API.test:443")},
		{name: "two hosts", fields: f("Host", "api.test", "Host", "api.test"), code: egressdapi.CodeHeaderInvalid},
		{name: "cl+te", fields: f("Content-Length", "2", "Transfer-Encoding", "chunked"), body: "ab", code: egressdapi.CodeHeaderInvalid},
		{name: "te gzip", fields: f("Transfer-Encoding", "gzip"), code: egressdapi.CodeHeaderInvalid},
		{name: "cl mismatch", fields: f("Content-Length", "5"), body: "ab", code: egressdapi.CodeInvalidRequest},
		{name: "cl ok", fields: f("Content-Length", "2"), body: "ab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("POST", "https://api.test/", tc.fields, []byte(tc.body), Limits{})
			is.New(t).Equal(wire.CodeOf(err), tc.code)
		})
	}
}

func TestParseStripsHopByHop(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	rec, err := Parse("GET", "https://api.test/", []Field{
		{"Connection", "X-Secret-Hop, keep-alive"}, {"X-Secret-Hop", "1"}, {"Proxy-Authorization", "Basic eA=="},
		{"Keep-Alive", "5"}, {"Upgrade", "h2c"}, {"X-Hostkit-Error", "forged"}, {"Accept", "*/*"},
		{"Transfer-Encoding", "chunked"},
	}, nil, Limits{})
	is.NoErr(err)
	is.Equal(len(rec.Header), 1)
	is.Equal(rec.Header.Get("Accept"), "*/*")
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	lim := Limits{MaxBody: 10, MaxHeaders: 2, MaxHeaderBytes: 20, MaxURL: 40}
	_, err := Parse("POST", "https://api.test/", nil, make([]byte, 11), lim)
	is.Equal(wire.CodeOf(err), egressdapi.CodeTooLarge)
	_, err = Parse("GET", "https://api.test/", []Field{{"A", "1"}, {"B", "2"}, {"C", "3"}}, nil, lim)
	is.Equal(wire.CodeOf(err), egressdapi.CodeTooLarge)
	_, err = Parse("GET", "https://api.test/", []Field{{"A", strings.Repeat("x", 20)}}, nil, lim)
	is.Equal(wire.CodeOf(err), egressdapi.CodeTooLarge)
	_, err = Parse("GET", "https://api.test/"+strings.Repeat("a", 40), nil, nil, lim)
	is.Equal(wire.CodeOf(err), egressdapi.CodeTooLarge)
}
