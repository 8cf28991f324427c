package netguard

import (
	"testing"

	"github.com/matryer/is"
)

func TestSplitHostPort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, host, code string
		port                 uint16
	}{
		{name: "host and port", in: "api.example.com:443", host: "api.example.com", port: 443},
		{name: "host only", in: "api.example.com", host: "api.example.com"},
		{name: "canonicalised", in: "API.Example.COM:8443", host: "api.example.com", port: 8443},
		{name: "idna", in: "bücher.example:443", host: "xn--bcher-kva.example", port: 443},
		{name: "ipv4", in: "127.0.0.1:8080", host: "127.0.0.1", port: 8080},
		{name: "ipv6", in: "[::1]:443", host: "[::1]", port: 443},
		{name: "ipv6 no port", in: "[::1]", host: "[::1]"},
		{name: "ipv6 long", in: "[0:0:0:0:0:0:0:1]:1", host: "[::1]", port: 1},
		{name: "max port", in: "h:65535", host: "h", port: 65535},

		{name: "empty", in: "", code: CodeHostEmpty},
		{name: "empty host", in: ":443", code: CodeHostEmpty},
		{name: "ipv6 unbracketed", in: "::1", code: CodeAuthorityInvalid},
		{name: "ipv6 unbracketed port", in: "::1:443", code: CodeAuthorityInvalid},
		{name: "junk after bracket", in: "[::1]443", code: CodeAuthorityInvalid},
		{name: "unclosed bracket", in: "[::1:443", code: CodeAuthorityInvalid},
		{name: "zone", in: "[::1%25lo]:443", code: CodeHostZone},
		{name: "port zero", in: "h:0", code: CodeAuthorityPortInvalid},
		{name: "port too big", in: "h:65536", code: CodeAuthorityPortInvalid},
		{name: "port plus", in: "h:+443", code: CodeAuthorityPortInvalid},
		{name: "port leading zero", in: "h:0443", code: CodeAuthorityPortInvalid},
		{name: "port empty", in: "h:", code: CodeAuthorityPortInvalid},
		{name: "port space", in: "h: 443", code: CodeAuthorityPortInvalid},
		{name: "userinfo", in: "u@h:443", code: CodeHostInvalid},
		{name: "short ipv4", in: "127.1:80", code: CodeHostAmbiguousNumeric},
		{name: "trailing dot", in: "localhost.:80", code: CodeHostTrailingDot},
		{name: "space", in: " h:443", code: CodeHostInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			host, port, err := SplitHostPort(tt.in)
			is.Equal(codeOf(t, err), tt.code)
			is.Equal(host, tt.host)
			is.Equal(port, tt.port)
			if err == nil {
				h2, p2, err := SplitHostPort(JoinHostPort(host, port))
				is.NoErr(err)
				is.Equal(h2, host) // JoinHostPort round-trips
				is.Equal(p2, port)
			}
		})
	}
}

func TestHostAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, host, want string
		ok               bool
	}{
		{"ipv4", "127.0.0.1", "127.0.0.1", true},
		{"ipv6 bracketed", "[::1]", "::1", true},
		{"ipv6 bare", "::1", "", false},
		{"ipv4 bracketed", "[127.0.0.1]", "", false},
		{"zone", "[fe80::1%eth0]", "", false},
		{"name", "localhost", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			a, ok := HostAddr(tt.host)
			is.Equal(ok, tt.ok)
			if ok {
				is.Equal(a.String(), tt.want)
			}
		})
	}
}
