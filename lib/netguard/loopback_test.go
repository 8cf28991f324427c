package netguard

import (
	"net/netip"
	"testing"

	"github.com/matryer/is"
)

func TestIsLiteralLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		host string
		want bool
	}{
		{"ipv4 first", "127.0.0.1", true},
		{"ipv4 last usable", "127.255.255.254", true},
		{"ipv4 network", "127.0.0.0", true},
		{"ipv4 other", "127.8.9.10", true},
		{"ipv6 bare", "::1", true},
		{"ipv6 bracketed", "[::1]", true},
		{"ipv6 long form", "0:0:0:0:0:0:0:1", true},
		{"ipv6 long bracketed", "[0:0:0:0:0:0:0:1]", true},
		{"localhost", "localhost", true},
		{"localhost upper", "LOCALHOST", true},
		{"localhost mixed", "LocalHost", true},

		{"empty", "", false},
		{"short form", "127.1", false},
		{"hex short", "0x7f.1", false},
		{"hex whole", "0x7f000001", false},
		{"decimal whole", "2130706433", false},
		{"octal", "0177.0.0.1", false},
		{"zero padded", "127.000.000.001", false},
		{"leading zero", "127.0.0.01", false},
		{"trailing dot", "localhost.", false},
		{"ipv4 trailing dot", "127.0.0.1.", false},
		{"mapped bracketed", "[::ffff:127.0.0.1]", false},
		{"mapped hex", "::ffff:7f00:1", false},
		{"mapped hex bracketed", "[::ffff:7f00:1]", false},
		{"compat", "::127.0.0.1", false},
		{"nat64", "64:ff9b::7f00:1", false},
		{"zone encoded bracketed", "[::1%25lo]", false},
		{"zone bare", "::1%lo", false},
		{"zone bracketed", "[::1%lo]", false},
		{"ipv4 bracketed", "[127.0.0.1]", false},
		{"half bracket", "[::1", false},
		{"localdomain", "localhost.localdomain", false},
		{"loopback word", "loopback", false},
		{"localhost subdomain", "a.localhost", false},
		{"long s look-alike", "localhoſt", false},
		{"fullwidth", "ｌｏｃａｌｈｏｓｔ", false},
		{"circled", "ⓛocalhost", false},
		{"zero width", "local\u200bhost", false},
		{"ideographic dot ipv4", "127。0。0。1", false},
		{"fullwidth digits", "１２７.０.０.１", false},
		{"with port", "127.0.0.1:80", false},
		{"bracketed with port", "[::1]:80", false},
		{"space", " localhost", false},
		{"resolvable name", "myhost.test", false},
		{"unspecified", "0.0.0.0", false},
		{"ipv6 unspecified", "::", false},
		{"private", "10.0.0.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(IsLiteralLoopback(tt.host), tt.want)
			if c, err := CanonicalHost(tt.host); err == nil {
				is.Equal(IsLiteralLoopback(c), tt.want) // canonical form agrees
			}
		})
	}
}

func TestIsLiteralLoopbackAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		addr netip.Addr
		want bool
	}{
		{"ipv4", netip.MustParseAddr("127.0.0.1"), true},
		{"ipv4 high", netip.MustParseAddr("127.255.255.255"), true},
		{"ipv6", netip.IPv6Loopback(), true},
		{"zero", netip.Addr{}, false},
		{"mapped", netip.MustParseAddr("::ffff:127.0.0.1"), false},
		{"zoned", netip.MustParseAddr("::1%lo"), false},
		{"public", netip.MustParseAddr("8.8.8.8"), false},
		{"ipv4 unspecified", netip.IPv4Unspecified(), false},
		{"ipv6 unspecified", netip.IPv6Unspecified(), false},
		{"compat", netip.MustParseAddr("::127.0.0.1"), false},
		{"128", netip.MustParseAddr("128.0.0.1"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(IsLiteralLoopbackAddr(tt.addr), tt.want)
		})
	}
}
