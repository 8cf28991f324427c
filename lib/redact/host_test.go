package redact

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// labels cuts s into labels of n characters joined by dots.
func labels(s string, n int) string {
	var parts []string
	for len(s) > n {
		parts, s = append(parts, s[:n]), s[n:]
	}
	return strings.Join(append(parts, s), ".")
}

// TestContainsInHost: a held value in a host name, in every form the
// scanner knows and those a host name forces (lowercased, base32 without
// padding, split over labels), is found; host names without one, or with
// only part of it, are not.
func TestContainsInHost(t *testing.T) {
	t.Parallel()
	v := spacedCanary
	s := NewScrubber()
	s.Register([]byte(v))
	low := strings.ToLower
	b32 := base32.StdEncoding.WithPadding(base32.NoPadding)
	b32hex := base32.HexEncoding.WithPadding(base32.NoPadding)
	tests := []struct {
		name, host string
		want       bool
	}{
		{"raw", v + ".example.com", true},
		{"raw, lowercased", low(v) + ".example.com", true},
		{"raw, upper-cased, with a port", strings.ToUpper(v) + ".example.com:8443", true},
		{"base64, lowercased", low(base64.RawStdEncoding.EncodeToString([]byte(v))) + ".example.com", true},
		{"base64url, lowercased", low(base64.RawURLEncoding.EncodeToString([]byte(v))) + ".example.com", true},
		{"base64 inside a longer blob, lowercased", low(base64.RawURLEncoding.EncodeToString([]byte("x:"+v+"!"))) + ".example.com", true},
		{"hex", hex.EncodeToString([]byte(v)) + ".example.com", true},
		{"hex, upper", strings.ToUpper(hex.EncodeToString([]byte(v))) + ".example.com", true},
		{"separated hex with hyphens", sepHex(v, "-", false, 0, "") + ".example.com", true},
		{"base32", low(b32.EncodeToString([]byte(v))) + ".example.com", true},
		{"base32 upper", b32.EncodeToString([]byte(v)) + ".example.com", true},
		{"base32hex", low(b32hex.EncodeToString([]byte(v))) + ".example.com", true},
		{"base32 inside a longer stream", low(b32.EncodeToString([]byte("ab"+v+"cd"))) + ".example.com", true},
		{"raw over labels", labels(v, 5) + ".example.com", true},
		{"hex over labels", labels(hex.EncodeToString([]byte(v)), 7) + ".example.com", true},
		{"base32 over labels", labels(low(b32.EncodeToString([]byte(v))), 9) + ".example.com", true},
		{"percent-encoded (a Host field)", percentAll(v) + ".example.com", true},
		{"soft hyphens inside (raw, before IDNA)", interleave(v, "\u00ad", 0, "") + ".example.com", true},
		{"a clean name", "api.example.com", false},
		{"a clean name with a port", "api.example.com:443", false},
		{"the value less its last byte", low(v[:len(v)-1]) + ".example.com", false},
		{"base32 of the value less a byte", low(b32.EncodeToString([]byte(v[:len(v)-2]))) + ".example.com", false},
		{"raw cut by a hyphen (only dots join labels)", v[:6] + "-" + v[6:] + ".example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is.New(t).Equal(s.ContainsInHost(tt.host), tt.want) // host
		})
	}
	is := is.New(t)
	is.True(!NewScrubber().ContainsInHost(v))    // nothing registered
	is.True(!(*Scrubber)(nil).ContainsInHost(v)) // nil scrubber
	unreg := s.Register([]byte("another-value-0042"))
	is.True(s.ContainsInHost("another-value-0042.example.com")) // a value registered later: the host matcher follows
	unreg()
	is.True(!s.ContainsInHost("another-value-0042.example.com")) // and forgets an unregistered one
	is.True(s.ContainsInHost(low(v) + ".example.com"))
}

// TestHostPatternsDropShort: a value made mostly of dots does not become
// a pattern that matches any host once its dots are removed.
func TestHostPatternsDropShort(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	s.Register([]byte("a.....b"))
	is.True(!s.ContainsInHost("example.com"))
	is.True(!s.ContainsInHost("ab.example.com"))
	is.True(s.ContainsInHost("a.....b.example.com")) // the raw value as written
}

// FuzzContainsInHost: never panics, and a registered value placed whole
// in a host, in any letter case and cut into labels, is always found.
func FuzzContainsInHost(f *testing.F) {
	for _, seed := range []string{"example.com", "a.b", "%41.example.com", "xn--bcher-kva.example", "\u00ad", "[::1]:443"} {
		f.Add(seed, uint8(3))
	}
	s := NewScrubber()
	s.Register([]byte(spacedCanary))
	f.Fuzz(func(t *testing.T, host string, cut uint8) {
		_ = s.ContainsInHost(host)
		n := 1 + int(cut)%len(spacedCanary)
		h := strings.ToUpper(labels(spacedCanary, n)) + "." + host
		if !s.ContainsInHost(h) {
			t.Fatalf("ContainsInHost(%q) missed the value", h)
		}
	})
}
