package manager

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/netns"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// failingAudit is an audit log whose disk is full: a fault the test
// cannot make a real log have.
type failingAudit struct{}

func (failingAudit) Append(context.Context, audit.Record) (uint64, error) {
	return 0, errors.New("no space left on device")
}

// writeReport puts a holder's refusal report into instance id's
// directory (or any directory name under the instances root).
func writeReport(t *testing.T, m *Manager, dir, file string, rep netns.RefusalReport) string {
	t.Helper()
	d := filepath.Join(m.st.Root, dir)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, file)
	if err := store.WriteJSONAtomic(p, rep); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDNSReportsAudited: a holder's report becomes one audit record
// naming the instance, the count and each reason and shape, and is
// removed; a report in the trash is not audited; while the audit log
// fails, the report stays for the next pass.
func TestDNSReportsAudited(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	state := t.TempDir()
	alog, err := audit.Open(audit.Options{Dir: filepath.Join(state, "log"), Daemon: "supervisord", Fsync: audit.FsyncNever})
	is.NoErr(err)
	defer alog.Close()
	m, err := New(Config{StateDir: state, Logger: slog.New(slog.DiscardHandler), Audit: alog})
	is.NoErr(err)
	id, err := api.CanonicalID("01234567-89ab-cdef-0123-456789abcdef")
	is.NoErr(err)
	rep := netns.RefusalReport{Since: 1, Until: 2, Count: 7, Refusals: []netns.RefusalCount{
		{Reason: netns.RefusedExhausted, Shape: "{1}.api.example.com", Count: 2},
		{Reason: netns.RefusedPolicy, Shape: "{24}.{5}.{7}", Count: 5}}}
	f := writeReport(t, m, id, store.FileDNSRefusedPrefix+"00000000000000000001.json", rep)
	trash := writeReport(t, m, ".trash-"+id+"-x", store.FileDNSRefusedPrefix+"00000000000000000002.json", rep)

	bad := &Manager{cfg: Config{Logger: m.cfg.Logger, Audit: failingAudit{}}, st: m.st}
	bad.auditDNSReports(context.Background())
	_, err = os.Stat(f)
	is.NoErr(err) // not audited: kept

	m.auditDNSReports(context.Background())
	_, err = os.Stat(f)
	is.True(errors.Is(err, os.ErrNotExist)) // audited: removed
	_, err = os.Stat(trash)
	is.NoErr(err) // never read
	b, err := os.ReadFile(filepath.Join(state, "log", "audit.jsonl"))
	is.NoErr(err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	is.Equal(len(lines), 1)
	var rec struct {
		Op      string `json:"op"`
		Outcome string `json:"outcome"`
		Fields  struct {
			Instance string `json:"instance_id"`
			Count    int    `json:"count"`
			Report   string `json:"report"`
			Refusals []struct {
				Reason, Shape string
				Count         int
			} `json:"refusals"`
		} `json:"fields"`
	}
	is.NoErr(json.Unmarshal([]byte(lines[0]), &rec))
	is.Equal(rec.Op, AuditDNSRefused)
	is.Equal(rec.Outcome, string(audit.OutcomeRefused))
	is.Equal(rec.Fields.Instance, id)
	is.Equal(rec.Fields.Count, 7)
	is.Equal(rec.Fields.Report, filepath.Base(f))
	is.Equal(len(rec.Fields.Refusals), 2)
	is.Equal(rec.Fields.Refusals[1].Shape, "{24}.{5}.{7}")
	is.Equal(rec.Fields.Refusals[1].Count, 5)
}

func TestNftHealth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		probe func() error
		want  map[string]any
	}{
		{"not probed", nil, map[string]any{"nftables": "unknown"}},
		{"available", func() error { return nil }, map[string]any{"nftables": "available"}},
		{"unavailable", func() error { return wire.Errorf(api.CodeNetworkNftUnavailable, "no nf_tables") },
			map[string]any{"nftables": "unavailable", "nftables_code": api.CodeNetworkNftUnavailable, "nftables_error": api.CodeNetworkNftUnavailable + ": no nf_tables"}},
		{"no namespace", func() error { return wire.Errorf(api.CodeRuntimeUnavailable, "not root") },
			map[string]any{"nftables": "unknown", "nftables_code": api.CodeRuntimeUnavailable, "nftables_error": api.CodeRuntimeUnavailable + ": not root"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(nftHealth(tt.probe), tt.want)
		})
	}
}
