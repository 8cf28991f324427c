package pipeline

import (
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
)

func TestLeaksDetectsCanary(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(leaks("x " + canary))
	is.True(leaks(base64.StdEncoding.EncodeToString([]byte(canary))))
	is.True(!leaks("hkp_abc [REDACTED]"))
}

// TestDecisionLineAndAudit: one egress.decision line per request, with the
// reason as a code; a before and an after record for a sent request, one
// record for a refusal.
func TestDecisionLineAndAudit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	up := &upstream{}
	srv := httptest.NewServer(up)
	defer srv.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port(srv))
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease(base, "header:Authorization", "Bearer {}")})
	_, err := f.do(Input{URL: base + "/ok", Corr: "c-1", Fields: map[string]any{"via": "tcp"}})
	is.NoErr(err)
	_, err = f.do(Input{Method: "TRACE", URL: base + "/", Corr: "c-2", Fields: map[string]any{"via": "unix"}})
	is.True(err != nil)

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		var m map[string]any
		is.NoErr(json.Unmarshal([]byte(l), &m))
		if m["msg"] == "egress.decision" {
			lines = append(lines, m)
		}
	}
	is.Equal(len(lines), 2)
	is.Equal(lines[0][KeyReason], ReasonOK)
	is.Equal(lines[0][KeyDecision], "allow")
	is.Equal(lines[0][KeyCredentials], float64(1))
	is.Equal(lines[1][KeyReason], egressdapi.CodeMethodForbidden)
	is.Equal(lines[1][KeyDecision], "deny")

	b, err := os.ReadFile(filepath.Join(f.auditDir, audit.DefaultName))
	is.NoErr(err)
	var recs []audit.Record
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r audit.Record
		is.NoErr(json.Unmarshal([]byte(l), &r))
		recs = append(recs, r)
	}
	is.Equal(len(recs), 3)
	is.Equal(recs[0].Phase, audit.PhaseBefore)
	is.Equal(recs[0].Corr, "c-1")
	is.Equal(recs[0].Fields[KeyCredentials], []any{"api"})
	is.Equal(recs[1].Phase, audit.PhaseAfter)
	is.Equal(recs[1].Outcome, audit.OutcomeOK)
	is.Equal(recs[1].Fields[KeyStatus], float64(200))
	is.Equal(recs[1].Fields[KeyCredentials], []any{"api"})
	is.Equal(recs[1].Fields[KeyOrigin], base)
	for i, via := range []string{"tcp", "tcp", "unix"} { // the caller's fields, in every record
		is.Equal(recs[i].Fields["via"], via)
	}
	is.Equal(recs[2].Outcome, audit.OutcomeRefused)
	is.Equal(recs[2].Code, egressdapi.CodeMethodForbidden)
}
