package demo

import (
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/matryer/is"
)

func TestParseAgent(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	out := "agent: I run as uid 61184; my environment has DEMO_API_TOKEN=hkp_abcdefghijklmnopqrstuvwxyz234567\r\n" +
		"agent: curl https://api.demo.test:1/v1/hello (with the placeholder) -> 200\n" +
		"agent: curl https://other.demo.test:2/collect (with the placeholder) -> 403 egress.placeholder_misuse\n" +
		"agent: curl https://other.demo.test:2/hello (without the placeholder) -> 000\n" +
		"agent: node v20.20.2 fetch, proxy variables set: none; api.demo.test resolves to 198.18.0.1\n" +
		"agent: node https://api.demo.test:1/v1/node (with the placeholder) -> 200\n" +
		"agent: node https://other.demo.test:2/collect (with the placeholder) -> error:ECONNRESET\n" +
		"noise hkp_short\n" + doneLine + "\n"
	v := parseAgent(out)
	is.Equal(v.uid, "61184")
	is.Equal(v.placeholders, []string{"hkp_abcdefghijklmnopqrstuvwxyz234567"})
	is.True(v.done)
	is.Equal(len(v.lines), 9)
	is.Equal(v.node, nodeView{version: "v20.20.2", proxy: "none", addr: "198.18.0.1"})
	r, ok := v.find("node", "https://api.demo.test:1", "with")
	is.True(ok)
	is.Equal(r.status, "200")
	r, ok = v.find("node", "https://other.demo.test:2", "with")
	is.True(ok)
	is.Equal(r, result{tool: "node", url: "https://other.demo.test:2/collect", with: "with", code: "error:ECONNRESET"})
	is.Equal(parseAgent("agent: node v18.19.0 fetch, proxy variables set: HTTPS_PROXY,http_proxy; api.demo.test resolves to error:ENOTFOUND").node,
		nodeView{version: "v18.19.0", proxy: "HTTPS_PROXY,http_proxy", addr: "error:ENOTFOUND"})
	r, ok = v.find("curl", "https://other.demo.test:2", "with")
	is.True(ok)
	is.Equal(r, result{tool: "curl", url: "https://other.demo.test:2/collect", with: "with", status: "403", code: "egress.placeholder_misuse"})
	r, ok = v.find("curl", "https://other.demo.test:2", "without")
	is.True(ok)
	is.Equal(r.status, "000")
	_, ok = v.find("python", "https://api.demo.test:1", "with")
	is.True(!ok)
	is.True(!parseAgent("agent: done but not quite").done)
}

func TestContainsSecret(t *testing.T) {
	t.Parallel()
	v := []byte("dk_secret/value+1")
	for _, tt := range []struct {
		name string
		in   string
		want bool
	}{
		{"raw", "x dk_secret/value+1 y", true},
		{"percent", "a=dk_secret%2Fvalue%2B1", true},
		{"base64", base64.StdEncoding.EncodeToString(v), true},
		{"base64url", base64.RawURLEncoding.EncodeToString(v), true},
		{"hex", hex.EncodeToString(v), true},
		{"preview", preview(v), false},
		{"prefix", "dk_secret/value", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is.New(t).Equal(containsSecret([]byte(tt.in), v), tt.want)
		})
	}
	is.New(t).True(!containsSecret([]byte("anything"), nil))
}
