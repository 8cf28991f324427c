package pipeline

import (
	"encoding/base32"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// TestScanHostNative: egress.request with a held value in its URL's host
// (a wildcard policy allows the name) or its Host field is refused with
// egress.secret_in_request and audited, without a lookup or a dial; the
// audit record names the origin with the host redacted; a clean name is
// looked up. No output, record or log line holds the value in any form.
func TestScanHostNative(t *testing.T) {
	t.Parallel()
	res := &egresstest.Lookups{}
	f := newFixture(t, fixtureConfig{resolver: res})
	f.register("inv", nil, "https://*.example.com")
	f.register("cred", []secretdapi.Lease{lease("https://api.example.com", "header:Authorization", "Bearer {}")})
	h := hex.EncodeToString([]byte(canary))
	b32 := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte(canary)))
	for _, tc := range []struct{ name, url, host string }{
		{"hex label", "https://" + h + ".example.com/", ""},
		{"hex over labels, upper case", "https://" + strings.ToUpper(h[:30]+"."+h[30:]) + ".example.com/", ""},
		{"base32 label", "https://" + b32 + ".example.com:8443/x", ""},
		{"Host field", "https://clean.example.com/", h + ".example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			in := Input{URL: tc.url}
			if tc.host != "" {
				in.Header = hdr("Host", tc.host)
			}
			_, err := f.do(in)
			is.Equal(wire.CodeOf(err), egressdapi.CodeSecretInRequest)
		})
	}
	is := is.New(t)
	names, _ := res.Seen()
	is.Equal(len(names), 0) // nothing was looked up
	f.mu.Lock()
	is.Equal(len(f.dialled), 0) // nor dialled
	f.mu.Unlock()
	b, err := os.ReadFile(filepath.Join(f.auditDir, audit.DefaultName))
	is.NoErr(err)
	is.True(strings.Count(string(b), `"code":"egress.secret_in_request"`) == 4)
	is.True(!strings.Contains(string(b), `example.com:8443`)) // refused before the record could name the origin
	probe := redact.NewScrubber()
	probe.Register([]byte(canary))
	for what, s := range map[string]string{"audit": string(b), "log": f.logs.String()} {
		if probe.ContainsInHost(s) {
			t.Errorf("the canary is in the %s", what)
		}
	}
	_, err = f.do(Input{URL: "https://clean.example.com/"})
	is.Equal(wire.CodeOf(err), egressdapi.CodeUpstreamError) // looked up (and unresolvable here)
	names, _ = res.Seen()
	is.Equal(names, []string{"clean.example.com"})
}

// TestScanHostCanonical: the canonical host is scanned too (after
// Validate), and a refusal there names the origin with its host
// redacted.
func TestScanHostCanonical(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newFixture(t, fixtureConfig{})
	f.register("cred", []secretdapi.Lease{lease("https://api.example.com", "header:Authorization", "Bearer {}")})
	h := hex.EncodeToString([]byte(canary))
	rec, err := request.Parse("GET", "https://"+h+".example.com:8443/", nil, nil, request.Limits{})
	is.NoErr(err)
	is.Equal(wire.CodeOf(f.p.ScanHost(Input{URL: "https://clean.example.com/"}, rec)), egressdapi.CodeSecretInRequest)
	is.Equal(redactedOrigin(rec), "https://"+redact.Redacted+":8443")
	clean, err := request.Parse("GET", "https://clean.example.com/", nil, nil, request.Limits{})
	is.NoErr(err)
	is.NoErr(f.p.ScanHost(Input{URL: "https://clean.example.com/"}, clean))
}
