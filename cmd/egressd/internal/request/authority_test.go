package request

import (
	"fmt"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// TestAuthoritiesMatchNetguard: the cache answers as netguard does, the
// first time and from the cache, errors included (never cached).
func TestAuthoritiesMatchNetguard(t *testing.T) {
	t.Parallel()
	var a Authorities
	for range 2 {
		for _, s := range []string{"api.test:443", "API.Test:8443", "127.0.0.1:80", "[::1]:80", "localhost", "0x7f.1:80",
			"a_b:80", "api.test:0", "api.test:99999", "[fe80::1%25eth0]:80", "bücher.example:443", "xn--bcher-kva.example",
			"", ":80", "h:1:2"} {
			is := is.New(t)
			host, port, err := a.SplitHostPort(s)
			wh, wp, werr := netguard.SplitHostPort(s)
			is.Equal(host, wh)                            // s
			is.Equal(port, wp)                            // s
			is.Equal(wire.CodeOf(err), wire.CodeOf(werr)) // s
		}
	}
	is := is.New(t)
	var nilCache *Authorities
	host, port, err := nilCache.SplitHostPort("Api.test:81")
	is.NoErr(err)
	is.Equal(host, "api.test")
	is.Equal(port, uint16(81))
}

// TestAuthoritiesOriginStrings: a record parsed through the cache (first
// time and cached) formats the same origin and authority as one parsed
// without it, for both schemes, default and explicit ports.
func TestAuthoritiesOriginStrings(t *testing.T) {
	t.Parallel()
	var a Authorities
	for range 2 {
		for _, u := range []string{"https://api.test/x", "https://API.test:443/x", "https://api.test:8443/x", "http://api.test/x",
			"http://api.test:80/", "http://api.test:443/", "https://api.test:80/", "https://[::1]:8443/x", "http://127.0.0.1/",
			"https://bücher.example/"} {
			is := is.New(t)
			got, err := parseURL(u, &a)
			is.NoErr(err)
			want, err := parseURL(u, nil)
			is.NoErr(err)
			is.Equal(want.origin, "")                         // not cached: formatted when asked
			is.Equal(got.OriginString(), want.OriginString()) // u
			is.Equal(got.Authority(), want.Authority())       // u
			is.Equal(got.Origin(), want.Origin())             // u
		}
	}
}

// TestAuthoritiesBounded: past maxAuthorities entries nothing more is
// kept, and answers stay right.
func TestAuthoritiesBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var a Authorities
	for i := range maxAuthorities + 100 {
		host, port, err := a.SplitHostPort(fmt.Sprintf("h%d.test:%d", i, 1+i%60000))
		is.NoErr(err)
		is.Equal(host, fmt.Sprintf("h%d.test", i))
		is.Equal(port, uint16(1+i%60000))
	}
	is.Equal(a.n.Load(), int64(maxAuthorities))
}

// TestRawAuthority: the authority exactly as written, whatever follows it.
func TestRawAuthority(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for in, want := range map[string]string{
		"https://API.Example.com:8443/a?b": "API.Example.com:8443",
		"http://h?q":                       "h",
		"https://h#f":                      "h",
		"https://h":                        "h",
		"no-scheme/x":                      "",
		"https://":                         "",
	} {
		is.Equal(RawAuthority(in), want) // in
	}
}
