package policy

import (
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

func origin(t *testing.T, s string) netguard.Origin {
	t.Helper()
	o, err := netguard.ParseOrigin(s)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestAllows(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p, err := Compile(egressdapi.Policy{Allow: []egressdapi.AllowRule{
		{Origin: "https://api.example.com"},
		{Origin: "https://*.cdn.example.com", Methods: []string{"GET", "HEAD"}},
		{Origin: "http://127.0.0.1:8080"},
	}})
	is.NoErr(err)
	is.Equal(p.Len(), 3)
	for _, tc := range []struct {
		origin, method string
		want           bool
	}{
		{"https://api.example.com", "POST", true},
		{"https://api.example.com:443", "GET", true},
		{"https://api.example.com:8443", "GET", false},
		{"https://a.cdn.example.com", "GET", true},
		{"https://a.cdn.example.com", "POST", false},
		{"https://cdn.example.com", "GET", false},
		{"http://127.0.0.1:8080", "GET", true},
		{"http://localhost:8080", "GET", false},
		{"https://evil.test", "GET", false},
	} {
		is.Equal(p.Allows(origin(t, tc.origin), tc.method), tc.want) // tc.origin
	}
	is.True(!Policy{}.Allows(origin(t, "https://api.example.com"), "GET"))
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	for _, rules := range [][]egressdapi.AllowRule{
		{{Origin: "http://api.example.com"}},
		{{Origin: "https://*.com"}},
		{{Origin: "https://api.example.com/path"}},
		{{Origin: "https://api.example.com", Methods: []string{"get"}}},
		{{Origin: "https://api.example.com", Methods: []string{"GE T"}}},
		make([]egressdapi.AllowRule, egressdapi.MaxAllowRules+1),
	} {
		_, err := Compile(egressdapi.Policy{Allow: rules})
		is.New(t).Equal(wire.CodeOf(err), egressdapi.CodeBundleInvalid)
	}
}
