package netguard

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestCanonicalHostAccepted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"lowercase", "api.example.com", "api.example.com"},
		{"uppercase", "API.Example.COM", "api.example.com"},
		{"single label", "localhost", "localhost"},
		{"localhost upper", "LOCALHOST", "localhost"},
		{"digits in labels", "1.2.3.example", "1.2.3.example"},
		{"hex-looking first label", "0x7f.example.com", "0x7f.example.com"},
		{"hyphen inside", "my-host.example", "my-host.example"},
		{"double hyphen inside", "r3---sn-apo3.googlevideo.com", "r3---sn-apo3.googlevideo.com"},
		{"idna", "bücher.example", "xn--bcher-kva.example"},
		{"idna uppercase", "BÜCHER.example", "xn--bcher-kva.example"},
		{"a-label", "xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"a-label uppercase", "XN--BCHER-KVA.example", "xn--bcher-kva.example"},
		{"sharp s non-transitional", "faß.de", "xn--fa-hia.de"},
		{"ipv4", "127.0.0.1", "127.0.0.1"},
		{"ipv4 public", "8.8.8.8", "8.8.8.8"},
		{"ipv4 zero", "0.0.0.0", "0.0.0.0"},
		{"ipv6 bracketed", "[::1]", "[::1]"},
		{"ipv6 bare", "::1", "[::1]"},
		{"ipv6 long", "[0:0:0:0:0:0:0:1]", "[::1]"},
		{"ipv6 upper", "[2001:DB8::1]", "[2001:db8::1]"},
		{"ipv6 mapped stays mapped", "[::ffff:127.0.0.1]", "[::ffff:127.0.0.1]"},
		{"max length", strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 126) + "a"},
		{"max label", strings.Repeat("a", 63) + ".example", strings.Repeat("a", 63) + ".example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := CanonicalHost(tt.in)
			is.NoErr(err)
			is.Equal(got, tt.want)
			again, err := CanonicalHost(got)
			is.NoErr(err)
			is.Equal(again, got) // idempotent
		})
	}
}

func TestCanonicalHostRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, code string
	}{
		{"empty", "", CodeHostEmpty},
		{"trailing dot", "localhost.", CodeHostTrailingDot},
		{"trailing dot fqdn", "api.example.com.", CodeHostTrailingDot},
		{"ipv4 trailing dot", "127.0.0.1.", CodeHostTrailingDot},
		{"lone dot", ".", CodeHostTrailingDot},
		{"leading dot", ".example.com", CodeHostIDNA},
		{"empty label", "a..example", CodeHostIDNA},
		{"leading hyphen", "-a.example", CodeHostIDNA},
		{"trailing hyphen", "a-.example", CodeHostIDNA},
		{"label too long", strings.Repeat("a", 64) + ".example", CodeHostIDNA},
		{"too long", strings.Repeat("a.", 127) + "a", CodeHostTooLong},
		{"huge", strings.Repeat("a", 5000), CodeHostTooLong},
		{"underscore", "my_host.example", CodeHostInvalid},
		{"star", "*.example.com", CodeHostInvalid},
		{"percent", "%6cocalhost", CodeHostInvalid},
		{"backslash", `evil.com\good.com`, CodeHostInvalid},
		{"at", "user@host", CodeHostInvalid},
		{"slash", "host/path", CodeHostInvalid},
		{"space", "exa mple.com", CodeHostInvalid},
		{"tab", "example.com\t", CodeHostInvalid},
		{"nul", "example\x00.com", CodeHostInvalid},
		{"invalid utf8", "ex\xffample.com", CodeHostInvalid},
		{"bad punycode", "xn--.example", CodeHostIDNA},
		{"ascii punycode", "xn--abc-.example", CodeHostIDNA},
		{"disallowed rune", "ex\u2028ample.com", CodeHostIDNA},
		{"bidi", "a\u05d0.example", CodeHostIDNA},
		{"short ipv4", "127.1", CodeHostAmbiguousNumeric},
		{"hex short ipv4", "0x7f.1", CodeHostAmbiguousNumeric},
		{"hex whole", "0x7f000001", CodeHostAmbiguousNumeric},
		{"hex upper", "0X7F000001", CodeHostAmbiguousNumeric},
		{"bare 0x", "example.0x", CodeHostAmbiguousNumeric},
		{"decimal whole", "2130706433", CodeHostAmbiguousNumeric},
		{"octal", "0177.0.0.1", CodeHostAmbiguousNumeric},
		{"zero padded", "127.000.000.001", CodeHostAmbiguousNumeric},
		{"octet overflow", "256.0.0.1", CodeHostAmbiguousNumeric},
		{"five parts", "1.2.3.4.5", CodeHostAmbiguousNumeric},
		{"numeric tld", "example.123", CodeHostAmbiguousNumeric},
		{"fullwidth digits", "１２７.０.０.１", CodeHostNotNormalized},
		{"fullwidth letters", "ｅｘａｍｐｌｅ.com", CodeHostNotNormalized},
		{"circled", "ⓛocalhost", CodeHostNotNormalized},
		{"long s", "localhoſt", CodeHostNotNormalized},
		{"kelvin sign", "\u212aelvin.example", CodeHostNotNormalized},
		{"zero width", "local\u200bhost", CodeHostNotNormalized},
		{"soft hyphen", "local\u00adhost", CodeHostNotNormalized},
		{"ideographic dot", "example。com", CodeHostNotNormalized},
		{"ideographic dot ipv4", "127。0。0。1", CodeHostNotNormalized},
		{"decomposed", "bu\u0308cher.example", CodeHostNotNormalized},
		{"trailing ideographic dot", "localhost。", CodeHostTrailingDot},
		{"zone bare", "::1%lo", CodeHostZone},
		{"zone bracketed", "[::1%25lo]", CodeHostZone},
		{"zone fe80", "[fe80::1%eth0]", CodeHostZone},
		{"ipv4 in brackets", "[127.0.0.1]", CodeHostInvalid},
		{"unclosed bracket", "[::1", CodeHostInvalid},
		{"empty brackets", "[]", CodeHostInvalid},
		{"bad ipv6", "[::g]", CodeHostInvalid},
		{"bare bad ipv6", "1:2:3", CodeHostInvalid},
		{"host with port", "example.com:443", CodeHostInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := CanonicalHost(tt.in)
			is.Equal(codeOf(t, err), tt.code)
			is.Equal(got, "")
		})
	}
}
