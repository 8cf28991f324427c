package pipeline

import (
	"net/http"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/wire"
)

// TestPlacementsHeader: a header placement is attached when its header
// holds exactly the rendered placeholder, and the search for misplaced
// placeholders skips only that header (Placements no longer copies the
// record for it): the same placeholder anywhere else, a second value of
// the header, or two credentials' placeholders in one header are refused;
// the record itself is left as it was.
func TestPlacementsHeader(t *testing.T) {
	t.Parallel()
	const ph2 = "hkp_bcdefghijklmnopqrstuvwxyz2345672"
	const base = "https://api.test"
	second := secretdapi.Lease{Credential: "api2", Destination: base, Placeholder: ph2, Target: "header:Authorization",
		Template: "Token {}", Value: []byte("second-" + canary)}
	query := secretdapi.Lease{Credential: "q", Destination: base, Placeholder: ph2, Target: "query:key", Value: []byte("q-" + canary)}
	for _, tc := range []struct {
		name   string
		leases []secretdapi.Lease
		url    string
		header []string
		attach []string // credential names; nil with misuse
		misuse bool
	}{
		{"placed", nil, base + "/x", []string{"Authorization", "Bearer " + ph}, []string{"api"}, false},
		{"placed, another header clean", nil, base + "/x", []string{"Authorization", "Bearer " + ph, "X-Other", "v"}, []string{"api"}, false},
		{"no placeholder", nil, base + "/x", []string{"X-Other", "v"}, nil, false},
		{"placed and in another header", nil, base + "/x", []string{"Authorization", "Bearer " + ph, "X-Token", ph}, nil, true},
		{"placed and in the query", nil, base + "/x?k=" + ph, []string{"Authorization", "Bearer " + ph}, nil, true},
		{"placed and in a header name", nil, base + "/x", []string{"Authorization", "Bearer " + ph, "X-" + ph, "v"}, nil, true},
		{"two values of the header", nil, base + "/x", []string{"Authorization", "Bearer " + ph, "Authorization", "Bearer " + ph}, nil, true},
		{"other template", nil, base + "/x", []string{"Authorization", "Token " + ph}, nil, true},
		{"other origin", nil, "https://other.test/x", []string{"Authorization", "Bearer " + ph}, nil, true},
		{"second credential of the header", []secretdapi.Lease{second}, base + "/x", []string{"Authorization", "Token " + ph2}, []string{"api2"}, false},
		{"first credential of the header", []secretdapi.Lease{second}, base + "/x", []string{"Authorization", "Bearer " + ph}, []string{"api"}, false},
		{"header and query", []secretdapi.Lease{query}, base + "/x?key=" + ph2, []string{"Authorization", "Bearer " + ph}, []string{"api", "q"}, false},
		{"header placed, query's placeholder in a header", []secretdapi.Lease{query}, base + "/x", []string{"Authorization", "Bearer " + ph, "X-Q", ph2}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			f := newFixture(t, fixtureConfig{})
			f.register("inv", append([]secretdapi.Lease{lease(base, "header:Authorization", "Bearer {}")}, tc.leases...), base, "https://other.test")
			b, err := f.reg.Get("inv")
			is.NoErr(err)
			rec, err := f.p.Validate(Input{Method: "GET", URL: tc.url, Header: hdr(tc.header...)})
			is.NoErr(err)
			before := rec.Clone()
			attach, err := f.p.Placements(b, rec)
			if tc.misuse {
				is.Equal(wire.CodeOf(err), egressdapi.CodePlaceholderMisuse)
			} else {
				is.NoErr(err)
				var names []string
				for _, c := range attach {
					names = append(names, c.Name)
				}
				is.Equal(names, tc.attach)
			}
			is.Equal(rec.Header, before.Header) // rec untouched
			is.Equal(rec.Target(), before.Target())
		})
	}
}

// TestSanitizeOrder: the answer's header comes out sorted by name, the
// values of one name in the order received, without the stripped ones.
func TestSanitizeOrder(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t, fixtureConfig{})
	h := http.Header{"X-B": {"1", "0", "2"}, "X-A": {"z"}, "Set-Cookie": {"s=1"}, "Connection": {"X-Drop"}, "X-Drop": {"d"},
		"X-Hostkit-Error": {"forged"}, "Content-Length": {"2"}, "Aa": {"first"}}
	out, err := f.p.SanitizeFields(h)
	is.NoErr(err)
	is.Equal(out, hdr("Aa", "first", "X-A", "z", "X-B", "1", "X-B", "0", "X-B", "2"))
}
