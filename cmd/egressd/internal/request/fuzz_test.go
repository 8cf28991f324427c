package request

import (
	"testing"

	"hostkit.dev/lib/netguard"
)

// FuzzParseURL checks that every URL Parse accepts is canonical: its host
// is CanonicalHost's, re-parsing its canonical spelling gives the same
// record, and the literal-loopback predicate agrees on both spellings.
// Seeds live in testdata/fuzz/FuzzParseURL.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"https://api.example.com/a?b", "http://127.0.0.1:8080/", "http://[::1]/x",
		"http://127.1/", "https://user@h/", "http://[::ffff:127.0.0.1]/", "https://Bücher.example/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rec, err := Parse("GET", s, nil, nil, Limits{})
		if err != nil {
			return
		}
		if h, err := netguard.CanonicalHost(rec.Host); err != nil || h != rec.Host {
			t.Fatalf("host %q is not canonical", rec.Host)
		}
		again, err := Parse("GET", rec.String(), nil, nil, Limits{})
		if err != nil {
			t.Fatalf("canonical form %q does not parse: %v", rec.String(), err)
		}
		if again.String() != rec.String() || again.Host != rec.Host || again.Port != rec.Port {
			t.Fatalf("not idempotent: %q then %q", rec.String(), again.String())
		}
		if rec.Port == 0 {
			t.Fatal("port 0")
		}
		if netguard.IsLiteralLoopback(rec.Host) && rec.Host != "localhost" {
			if a, ok := netguard.HostAddr(rec.Host); !ok || !netguard.IsLiteralLoopbackAddr(a) {
				t.Fatalf("loopback host %q is not a loopback address", rec.Host)
			}
		}
		if u := rec.URL(); u.RequestURI() != rec.Target() && u.Opaque == "" {
			t.Fatalf("request URI %q != target %q", u.RequestURI(), rec.Target())
		}
	})
}
