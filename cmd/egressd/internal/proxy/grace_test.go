package proxy

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// TestReregisterGrace: right after a start, a request naming a
// well-formed invocation without a bundle is told to come back (503
// egress.unavailable, Retry-After: 1) rather than refused for good (407),
// on both listeners, absolute-form and CONNECT; a missing, malformed or
// wrong token of a known invocation is 407 as ever, and so is an unknown
// invocation once the grace is over or without one.
func TestReregisterGrace(t *testing.T) {
	t.Parallel()
	unknown := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("gone-1:"+strings.Repeat("g", 43))) + "\r\n"
	wrongTok := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("open:"+strings.Repeat("x", 43))) + "\r\n"
	malformed := "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("Not_An_Id:"+strings.Repeat("g", 43))) + "\r\n"
	for _, tc := range []struct {
		name  string
		grace time.Duration
		auth  string
		want  int
	}{
		{"unknown invocation in the grace", time.Hour, unknown, http.StatusServiceUnavailable},
		{"unknown invocation after the grace", time.Nanosecond, unknown, http.StatusProxyAuthRequired},
		{"unknown invocation without a grace", 0, unknown, http.StatusProxyAuthRequired},
		{"wrong token of a known invocation in the grace", time.Hour, wrongTok, http.StatusProxyAuthRequired},
		{"no token in the grace", time.Hour, "", http.StatusProxyAuthRequired},
		{"malformed invocation in the grace", time.Hour, malformed, http.StatusProxyAuthRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *Config) { c.ReregisterGrace = tc.grace })
			for via, dial := range h.dialers() {
				for _, raw := range []string{
					"GET https://x.example.com/ HTTP/1.1\r\nHost: x.example.com\r\n" + tc.auth + "\r\n",
					"CONNECT x.example.com:443 HTTP/1.1\r\nHost: x.example.com:443\r\n" + tc.auth + "\r\n",
				} {
					is := is.New(t)
					resp, body, _ := exchange(t, dial, raw, false, false)
					if resp.StatusCode != tc.want {
						t.Fatalf("%s: %s, want %d", via, resp.Status, tc.want)
					}
					switch tc.want {
					case http.StatusServiceUnavailable:
						is.Equal(resp.Header.Get(HeaderError), egressdapi.CodeUnavailable)
						is.Equal(resp.Header.Get("Retry-After"), "1")
						is.Equal(resp.Header.Get("Proxy-Authenticate"), "")
						is.True(strings.Contains(string(body), egressdapi.CodeUnavailable))
					default:
						is.Equal(resp.Header.Get(HeaderError), wire.CodePeerDenied)
						is.Equal(resp.Header.Get("Retry-After"), "")
					}
				}
			}
			if tc.want == http.StatusServiceUnavailable {
				// Audited as an authentication refusal with its code.
				a := h.auditText(t)
				is.New(t).True(strings.Contains(a, `"code":"egress.unavailable"`) && strings.Contains(a, `"why":"unknown_invocation"`))
			}
		})
	}
}
