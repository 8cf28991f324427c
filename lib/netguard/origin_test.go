package netguard

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestParseOriginAccepted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		origin         Origin
	}{
		{"plain", "https://api.example.com", "https://api.example.com", Origin{"https", "api.example.com", 0}},
		{"case and default port", "HTTPS://API.Example.COM:443", "https://api.example.com", Origin{"https", "api.example.com", 0}},
		{"port", "https://api.example.com:8443", "https://api.example.com:8443", Origin{"https", "api.example.com", 8443}},
		{"port 80 on https kept", "https://example.com:80", "https://example.com:80", Origin{"https", "example.com", 80}},
		{"max port", "https://example.com:65535", "https://example.com:65535", Origin{"https", "example.com", 65535}},
		{"port 1", "https://example.com:1", "https://example.com:1", Origin{"https", "example.com", 1}},
		{"idna", "https://bücher.example", "https://xn--bcher-kva.example", Origin{"https", "xn--bcher-kva.example", 0}},
		{"https ipv4", "https://8.8.8.8", "https://8.8.8.8", Origin{"https", "8.8.8.8", 0}},
		{"https ipv6", "https://[2001:DB8::1]:8443", "https://[2001:db8::1]:8443", Origin{"https", "[2001:db8::1]", 8443}},
		{"https localhost", "https://localhost", "https://localhost", Origin{"https", "localhost", 0}},
		{"https mapped", "https://[::ffff:127.0.0.1]", "https://[::ffff:127.0.0.1]", Origin{"https", "[::ffff:127.0.0.1]", 0}},
		{"http loopback v4", "http://127.0.0.1:8080", "http://127.0.0.1:8080", Origin{"http", "127.0.0.1", 8080}},
		{"http loopback v4 other", "http://127.1.2.3", "http://127.1.2.3", Origin{"http", "127.1.2.3", 0}},
		{"http localhost", "http://localhost:3000", "http://localhost:3000", Origin{"http", "localhost", 3000}},
		{"http localhost upper", "HTTP://LOCALHOST:3000", "http://localhost:3000", Origin{"http", "localhost", 3000}},
		{"http ipv6 default port", "http://[::1]:80", "http://[::1]", Origin{"http", "[::1]", 0}},
		{"http ipv6 long", "http://[0:0:0:0:0:0:0:1]:9000", "http://[::1]:9000", Origin{"http", "[::1]", 9000}},
		{"http port 443 kept", "http://localhost:443", "http://localhost:443", Origin{"http", "localhost", 443}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			o, err := ParseOrigin(tt.in)
			is.NoErr(err)
			is.Equal(o, tt.origin)
			is.Equal(o.String(), tt.want)
			s, err := CanonicalOrigin(tt.in)
			is.NoErr(err)
			is.Equal(s, tt.want)
			again, err := ParseOrigin(s)
			is.NoErr(err)
			is.Equal(again, o) // canonical form re-parses to the same Origin
		})
	}
}

func TestParseOriginRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, code string
	}{
		{"empty", "", CodeOriginInvalid},
		{"no scheme", "example.com", CodeOriginInvalid},
		{"scheme relative", "//example.com", CodeOriginInvalid},
		{"one slash", "https:/example.com", CodeOriginInvalid},
		{"bad scheme chars", "ht_tp://example.com", CodeOriginInvalid},
		{"too long", "https://" + strings.Repeat("a", 3000), CodeOriginInvalid},
		{"leading space", " https://example.com", CodeOriginInvalid},
		{"trailing space", "https://example.com ", CodeOriginInvalid},
		{"trailing newline", "https://example.com\n", CodeOriginInvalid},
		{"inner tab", "https://exa\tmple.com", CodeOriginInvalid},
		{"nul", "https://example.com\x00", CodeOriginInvalid},
		{"c1 control", "https://example.com\u0085", CodeOriginInvalid},
		{"nbsp", "https://example.com\u00a0", CodeOriginInvalid},
		{"invalid utf8", "https://ex\xffample.com", CodeOriginInvalid},
		{"ftp", "ftp://example.com", CodeOriginSchemeUnsupported},
		{"ws", "ws://localhost", CodeOriginSchemeUnsupported},
		{"file", "file://localhost", CodeOriginSchemeUnsupported},
		{"plaintext", "http://example.com", CodeOriginPlaintext},
		{"plaintext private", "http://10.0.0.1", CodeOriginPlaintext},
		{"plaintext mapped loopback", "http://[::ffff:127.0.0.1]", CodeOriginPlaintext},
		{"plaintext mapped hex", "http://[::ffff:7f00:1]", CodeOriginPlaintext},
		{"plaintext localdomain", "http://localhost.localdomain", CodeOriginPlaintext},
		{"plaintext resolvable", "http://myhost.test", CodeOriginPlaintext},
		{"plaintext unspecified", "http://0.0.0.0", CodeOriginPlaintext},
		{"plaintext short loopback", "http://127.1", CodeHostAmbiguousNumeric},
		{"plaintext hex loopback", "http://0x7f.1", CodeHostAmbiguousNumeric},
		{"plaintext decimal loopback", "http://2130706433", CodeHostAmbiguousNumeric},
		{"plaintext octal loopback", "http://0177.0.0.1", CodeHostAmbiguousNumeric},
		{"plaintext padded loopback", "http://127.000.000.001", CodeHostAmbiguousNumeric},
		{"plaintext localhost dot", "http://localhost.", CodeHostTrailingDot},
		{"plaintext circled localhost", "http://ⓛocalhost", CodeHostNotNormalized},
		{"plaintext long s localhost", "http://localhoſt", CodeHostNotNormalized},
		{"plaintext fullwidth loopback", "http://１２７.０.０.１", CodeHostNotNormalized},
		{"https trailing dot", "https://api.example.com.", CodeHostTrailingDot},
		{"userinfo", "https://user@example.com", CodeOriginUserinfo},
		{"userinfo password", "https://user:pw@example.com", CodeOriginUserinfo},
		{"empty userinfo", "https://@example.com", CodeOriginUserinfo},
		{"userinfo confusion", "https://example.com@evil.com", CodeOriginUserinfo},
		{"slash", "https://example.com/", CodeOriginPath},
		{"path", "https://example.com/path", CodeOriginPath},
		{"path with at", "https://example.com/@evil.com", CodeOriginPath},
		{"backslash", `https://evil.com\@good.com`, CodeOriginPath},
		{"query", "https://example.com?q", CodeOriginQuery},
		{"empty query", "https://example.com?", CodeOriginQuery},
		{"fragment", "https://example.com#f", CodeOriginFragment},
		{"port zero", "https://example.com:0", CodeOriginPortInvalid},
		{"port too big", "https://example.com:65536", CodeOriginPortInvalid},
		{"port huge", "https://example.com:99999999999", CodeOriginPortInvalid},
		{"port plus", "https://example.com:+443", CodeOriginPortInvalid},
		{"port minus", "https://example.com:-1", CodeOriginPortInvalid},
		{"port leading zero", "https://example.com:0443", CodeOriginPortInvalid},
		{"port empty", "https://example.com:", CodeOriginPortInvalid},
		{"port hex", "https://example.com:0x1bb", CodeOriginPortInvalid},
		{"port letters", "https://example.com:https", CodeOriginPortInvalid},
		{"port fullwidth", "https://example.com:４４３", CodeOriginPortInvalid},
		{"two colons", "https://example.com:443:443", CodeOriginInvalid},
		{"ipv6 unbracketed", "https://::1", CodeOriginInvalid},
		{"ipv6 zone", "https://[::1%25lo]", CodeHostZone},
		{"http ipv6 zone", "http://[::1%lo]:80", CodeHostZone},
		{"ipv6 junk after bracket", "https://[::1]x", CodeOriginInvalid},
		{"ipv6 unclosed", "https://[::1", CodeOriginInvalid},
		{"ipv4 bracketed", "https://[127.0.0.1]", CodeHostInvalid},
		{"empty host", "https://", CodeHostEmpty},
		{"empty host with port", "https://:443", CodeHostEmpty},
		{"underscore", "https://my_host.example", CodeHostInvalid},
		{"wildcard", "https://*.example.com", CodeHostInvalid},
		{"percent", "https://%6cocalhost", CodeHostInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			o, err := ParseOrigin(tt.in)
			is.Equal(codeOf(t, err), tt.code)
			is.Equal(o, Origin{})
			s, err := CanonicalOrigin(tt.in)
			is.Equal(codeOf(t, err), tt.code)
			is.Equal(s, "")
		})
	}
}

func TestOriginHelpers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		o                   Origin
		str, hostname, addr string
		effectivePort       uint16
	}{
		{"https default", Origin{"https", "api.example.com", 0}, "https://api.example.com", "api.example.com", "api.example.com:443", 443},
		{"explicit default", Origin{"https", "api.example.com", 443}, "https://api.example.com", "api.example.com", "api.example.com:443", 443},
		{"http ipv6", Origin{"http", "[::1]", 8080}, "http://[::1]:8080", "::1", "[::1]:8080", 8080},
		{"bare ipv6 host bracketed", Origin{"http", "::1", 0}, "http://[::1]", "::1", "[::1]:80", 80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(tt.o.String(), tt.str)
			is.Equal(tt.o.Hostname(), tt.hostname)
			is.Equal(tt.o.Address(), tt.addr)
			is.Equal(tt.o.EffectivePort(), tt.effectivePort)
		})
	}
}
