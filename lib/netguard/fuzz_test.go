package netguard

import (
	"net/netip"
	"strings"
	"testing"
)

// Seeds live in testdata/fuzz/<FuzzName>/ (go test fuzz v1), including the
// hostile hosts of the unit tables.

func FuzzParseOrigin(f *testing.F) {
	f.Add("https://api.example.com")
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseOrigin(s)
		if err != nil {
			if codeOf(t, err) == "" {
				t.Fatal("error without code")
			}
			return
		}
		out := o.String()
		if !isCanonicalASCII(out) {
			t.Fatalf("ParseOrigin(%q).String() = %q: not lowercase ASCII", s, out)
		}
		again, err := ParseOrigin(out)
		if err != nil || again != o {
			t.Fatalf("ParseOrigin(%q) = %#v; its String %q re-parses to %#v, %v", s, o, out, again, err)
		}
		if h, err := CanonicalHost(o.Host); err != nil || h != o.Host {
			t.Fatalf("host %q of %q is not canonical: %q, %v", o.Host, s, h, err)
		}
		switch o.Scheme {
		case SchemeHTTP:
			if !IsLiteralLoopback(o.Host) {
				t.Fatalf("http origin %q accepted with non-loopback host %q", s, o.Host)
			}
			if a, ok := HostAddr(o.Host); ok && !IsLiteralLoopbackAddr(a) {
				t.Fatalf("http origin %q: address %v not loopback", s, a)
			}
		case SchemeHTTPS:
		default:
			t.Fatalf("scheme %q accepted", o.Scheme)
		}
		if o.Port == DefaultPort(o.Scheme) {
			t.Fatalf("default port not normalised in %#v", o)
		}
		if got, err := CanonicalOrigin(s); err != nil || got != out {
			t.Fatalf("CanonicalOrigin(%q) = %q, %v; want %q", s, got, err, out)
		}
	})
}

func FuzzCanonicalHost(f *testing.F) {
	f.Add("api.example.com")
	f.Fuzz(func(t *testing.T, s string) {
		loop := IsLiteralLoopback(s)
		h, err := CanonicalHost(s)
		if err != nil {
			codeOf(t, err)
			if h != "" {
				t.Fatalf("CanonicalHost(%q) returned %q with an error", s, h)
			}
			return
		}
		if !isCanonicalASCII(h) || len(h) > MaxHostLen+2 || strings.HasSuffix(h, ".") {
			t.Fatalf("CanonicalHost(%q) = %q: not canonical", s, h)
		}
		if again, err := CanonicalHost(h); err != nil || again != h {
			t.Fatalf("CanonicalHost not idempotent on %q: %q, %v", h, again, err)
		}
		if IsLiteralLoopback(h) != loop {
			t.Fatalf("IsLiteralLoopback(%q)=%v but IsLiteralLoopback(%q)=%v", s, loop, h, !loop)
		}
		if a, ok := HostAddr(h); ok {
			if IsLiteralLoopbackAddr(a) != loop {
				t.Fatalf("IsLiteralLoopbackAddr(%v) disagrees with IsLiteralLoopback(%q)", a, s)
			}
		} else if strings.ContainsAny(h, "[]:") || (endsInNumber(h) && h != "") {
			t.Fatalf("CanonicalHost(%q) = %q: looks like an IP literal but is not one", s, h)
		}
		if loop && h != "localhost" {
			if a, ok := HostAddr(h); !ok || Classify(a) != ClassLoopback {
				t.Fatalf("loopback host %q does not classify as loopback", h)
			}
		}
		if o, err := ParseOrigin("https://" + h); err != nil || o.Host != h {
			t.Fatalf("canonical host %q rejected in an origin: %v", h, err)
		}
	})
}

func FuzzSplitHostPort(f *testing.F) {
	f.Add("api.example.com:443")
	f.Fuzz(func(t *testing.T, s string) {
		host, port, err := SplitHostPort(s)
		if err != nil {
			codeOf(t, err)
			if host != "" || port != 0 {
				t.Fatalf("SplitHostPort(%q) returned %q, %d with an error", s, host, port)
			}
			return
		}
		if h, err := CanonicalHost(host); err != nil || h != host {
			t.Fatalf("SplitHostPort(%q) host %q not canonical", s, host)
		}
		h2, p2, err := SplitHostPort(JoinHostPort(host, port))
		if err != nil || h2 != host || p2 != port {
			t.Fatalf("JoinHostPort(%q, %d) does not round-trip: %q, %d, %v", host, port, h2, p2, err)
		}
		if a, ok := HostAddr(host); ok {
			_ = netip.AddrPortFrom(a, port)
		}
	})
}

func isCanonicalASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || c <= ' ' || ('A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}
