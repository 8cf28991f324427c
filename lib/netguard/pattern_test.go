package netguard

import (
	"testing"

	"github.com/matryer/is"
)

func TestParsePattern(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want, code string
		wildcard             bool
	}{
		{name: "exact", in: "https://api.example.com", want: "https://api.example.com"},
		{name: "exact canonicalised", in: "HTTPS://API.example.com:443", want: "https://api.example.com"},
		{name: "exact loopback http", in: "http://localhost:3000", want: "http://localhost:3000"},
		{name: "wildcard", in: "https://*.example.com", want: "https://*.example.com", wildcard: true},
		{name: "wildcard port", in: "https://*.example.com:8443", want: "https://*.example.com:8443", wildcard: true},
		{name: "wildcard default port", in: "HTTPS://*.Example.COM:443", want: "https://*.example.com", wildcard: true},
		{name: "wildcard idna", in: "https://*.bücher.example", want: "https://*.xn--bcher-kva.example", wildcard: true},
		{name: "wildcard deep suffix", in: "https://*.a.b.example.com", want: "https://*.a.b.example.com", wildcard: true},

		{name: "too broad", in: "https://*.com", code: CodePatternTooBroad},
		{name: "too broad localhost", in: "https://*.localhost", code: CodePatternTooBroad},
		{name: "bare star", in: "https://*", code: CodePatternWildcardInvalid},
		{name: "star prefix", in: "https://*example.com", code: CodePatternWildcardInvalid},
		{name: "inner star", in: "https://a.*.example.com", code: CodePatternWildcardInvalid},
		{name: "partial label", in: "https://a*.example.com", code: CodePatternWildcardInvalid},
		{name: "double star", in: "https://*.*.example.com", code: CodePatternWildcardInvalid},
		{name: "star port", in: "https://example.com:*", code: CodePatternWildcardInvalid},
		{name: "wildcard over ipv4", in: "https://*.1.2.3.4", code: CodePatternWildcardInvalid},
		{name: "wildcard over ipv6", in: "https://*.[::1]", code: CodePatternWildcardInvalid},
		{name: "wildcard http", in: "http://*.example.com", code: CodePatternWildcardScheme},
		{name: "wildcard ftp", in: "ftp://*.example.com", code: CodePatternWildcardScheme},
		{name: "wildcard path", in: "https://*.example.com/", code: CodeOriginPath},
		{name: "wildcard userinfo", in: "https://*.u@example.com", code: CodeOriginUserinfo},
		{name: "wildcard trailing dot", in: "https://*.example.com.", code: CodeHostTrailingDot},
		{name: "wildcard numeric", in: "https://*.0x7f.1", code: CodeHostAmbiguousNumeric},
		{name: "exact plaintext", in: "http://example.com", code: CodeOriginPlaintext},
		{name: "tcp", in: "tcp://db.example.com:5432", want: "tcp://db.example.com:5432"},
		{name: "tcp canonicalised", in: "TCP://DB.Example.com:443", want: "tcp://db.example.com:443"},
		{name: "tcp ipv6", in: "tcp://[2001:db8::1]:22", want: "tcp://[2001:db8::1]:22"},
		{name: "tcp ipv4", in: "tcp://192.0.2.7:25", want: "tcp://192.0.2.7:25"},
		{name: "tcp no port", in: "tcp://db.example.com", code: CodeOriginPortInvalid},
		{name: "tcp port zero", in: "tcp://db.example.com:0", code: CodeOriginPortInvalid},
		{name: "tcp wildcard", in: "tcp://*.example.com:22", code: CodePatternWildcardScheme},
		{name: "tcp path", in: "tcp://db.example.com:22/", code: CodeOriginPath},
		{name: "tcp userinfo", in: "tcp://u@db.example.com:22", code: CodeOriginUserinfo},
		{name: "tcp numeric", in: "tcp://0x7f.1:22", code: CodeHostAmbiguousNumeric},
		{name: "no scheme", in: "*.example.com", code: CodeOriginInvalid},
		{name: "empty", in: "", code: CodeOriginInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			p, err := ParsePattern(tt.in)
			is.Equal(codeOf(t, err), tt.code)
			is.Equal(p.String() == tt.want || err != nil, true)
			is.Equal(p.IsWildcard(), tt.wildcard)
			if err == nil {
				again, err := ParsePattern(p.String())
				is.NoErr(err)
				is.Equal(again, p) // canonical spelling re-parses
			}
		})
	}
}

func TestPatternMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern, origin string
		want                  bool
	}{
		{"exact", "https://api.example.com", "https://api.example.com", true},
		{"exact default port", "https://api.example.com", "https://api.example.com:443", true},
		{"exact explicit default port", "https://api.example.com:443", "https://api.example.com", true},
		{"exact other port", "https://api.example.com", "https://api.example.com:8443", false},
		{"exact other host", "https://api.example.com", "https://www.example.com", false},
		{"exact subdomain", "https://example.com", "https://a.example.com", false},
		{"exact loopback", "http://localhost:3000", "http://localhost:3000", true},
		{"exact loopback port", "http://localhost:3000", "http://localhost:3001", false},
		{"exact scheme", "https://localhost", "http://localhost", false},
		{"wildcard one label", "https://*.example.com", "https://a.example.com", true},
		{"wildcard two labels", "https://*.example.com", "https://a.b.example.com", true},
		{"wildcard apex", "https://*.example.com", "https://example.com", false},
		{"wildcard suffix lookalike", "https://*.example.com", "https://aexample.com", false},
		{"wildcard other domain", "https://*.example.com", "https://example.com.evil.com", false},
		{"wildcard port default", "https://*.example.com", "https://a.example.com:443", true},
		{"wildcard port mismatch", "https://*.example.com", "https://a.example.com:8443", false},
		{"wildcard port match", "https://*.example.com:8443", "https://a.example.com:8443", true},
		{"wildcard port required", "https://*.example.com:8443", "https://a.example.com", false},
		{"wildcard idna", "https://*.bücher.example", "https://a.xn--bcher-kva.example", true},
		{"wildcard case", "https://*.example.com", "HTTPS://A.EXAMPLE.COM", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			p, err := ParsePattern(tt.pattern)
			is.NoErr(err)
			o, err := ParseOrigin(tt.origin)
			is.NoErr(err)
			is.Equal(p.Match(o), tt.want)
		})
	}
}

func TestPatternMatchNonCanonical(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    Origin
	}{
		{"uppercase", Origin{"https", "A.EXAMPLE.COM", 0}},
		{"trailing dot", Origin{"https", "a.example.com.", 0}},
		{"empty label", Origin{"https", ".example.com", 0}},
		{"empty", Origin{}},
	}
	p, err := ParsePattern("https://*.example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.True(!p.Match(tt.o))
			is.True(!(Pattern{}).Match(tt.o)) // zero Pattern matches nothing
		})
	}
}

// TestTCPPattern: a tcp:// pattern matches its own host and port over
// tcp only, never https or http on the same host and port; and tcp:// is
// never an origin, so never a credential destination.
func TestTCPPattern(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p, err := ParsePattern("tcp://db.example.com:5432")
	is.NoErr(err)
	is.True(p.Match(Origin{Scheme: SchemeTCP, Host: "db.example.com", Port: 5432}))
	is.True(!p.Match(Origin{Scheme: SchemeTCP, Host: "db.example.com", Port: 5433}))
	is.True(!p.Match(Origin{Scheme: SchemeHTTPS, Host: "db.example.com", Port: 5432}))
	is.True(!p.Match(Origin{Scheme: SchemeTCP, Host: "x.db.example.com", Port: 5432}))
	h, err := ParsePattern("https://db.example.com:5432")
	is.NoErr(err)
	is.True(!h.Match(Origin{Scheme: SchemeTCP, Host: "db.example.com", Port: 5432}))
	_, err = ParseOrigin("tcp://db.example.com:5432")
	is.Equal(codeOf(t, err), CodeOriginSchemeUnsupported)
}

func TestPatternMatchHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pattern, host string
		want                bool
	}{
		{"exact", "https://api.example.com", "api.example.com", true},
		{"exact other port", "https://api.example.com:8443", "api.example.com", true},
		{"exact other host", "https://api.example.com", "example.com", false},
		{"exact sub", "https://api.example.com", "x.api.example.com", false},
		{"wildcard sub", "https://*.example.com", "a.b.example.com", true},
		{"wildcard apex", "https://*.example.com", "example.com", false},
		{"wildcard suffix trick", "https://*.example.com", "evilexample.com", false},
		{"tcp", "tcp://db.example.com:5432", "db.example.com", true},
		{"loopback", "http://localhost:3000", "localhost", true},
		{"ip", "https://192.0.2.1", "192.0.2.1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			p, err := ParsePattern(tt.pattern)
			is.NoErr(err)
			is.Equal(p.MatchHost(tt.host), tt.want)
		})
	}
	is.New(t).True(!Pattern{}.MatchHost("example.com"))
}
