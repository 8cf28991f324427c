package manager

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/audit"

	"hostkit.dev/cmd/supervisord/internal/netns"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// AuditDNSRefused is the audit op of an isolated instance's resolver
// refusals: one record per holder report (at most one a second per
// instance), naming the instance, the time span, the count, and each
// refused name's reason and shape (netns.Shape: no label the policy
// does not name).
const AuditDNSRefused = "network.dns_refused"

// dnsAuditEvery is how often RunDNSAudit looks for reports.
const dnsAuditEvery = time.Second

// RunDNSAudit audits, until ctx ends, the refusal reports the holders of
// isolated instances write (netns.RefusalReport in
// store.FileDNSRefusedPrefix files), and removes each once its record is
// written: at least once, since a crash between the two audits it again
// at the next start (the record carries the report's file name, so a
// reader can tell a repeat).
func (m *Manager) RunDNSAudit(ctx context.Context) {
	t := time.NewTicker(dnsAuditEvery)
	defer t.Stop()
	for {
		m.auditDNSReports(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// auditDNSReports is one pass of RunDNSAudit.
func (m *Manager) auditDNSReports(ctx context.Context) {
	files, _ := filepath.Glob(filepath.Join(m.st.Root, "*", store.FileDNSRefusedPrefix+"*.json"))
	for _, f := range files {
		id := filepath.Base(filepath.Dir(f))
		if _, err := api.CanonicalID(id); err != nil {
			continue // the trash: the instance is gone
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue // removed by a destroy meanwhile
		}
		var rep netns.RefusalReport
		if err := json.Unmarshal(b, &rep); err != nil {
			m.cfg.Logger.Error("network.dns_report_invalid", slog.String("instance", id), slog.String("file", filepath.Base(f)), slog.Any("err", err))
			os.Remove(f) // written whole by a rename: it never parses
			continue
		}
		if !m.appendDNSRefused(ctx, id, filepath.Base(f), rep) {
			return // the audit log fails: try every report again later
		}
		os.Remove(f)
	}
}

// appendDNSRefused writes rep's audit record and reports whether it was
// written (or no audit log is configured).
func (m *Manager) appendDNSRefused(ctx context.Context, id, file string, rep netns.RefusalReport) bool {
	if m.cfg.Audit == nil {
		return true
	}
	refusals := make([]map[string]any, 0, len(rep.Refusals))
	for _, r := range rep.Refusals {
		refusals = append(refusals, map[string]any{"reason": r.Reason, "shape": r.Shape, "count": r.Count})
	}
	rec := audit.Record{Actor: audit.Actor{UID: os.Geteuid(), PID: os.Getpid()}, Op: AuditDNSRefused, Outcome: audit.OutcomeRefused,
		Fields: map[string]any{"instance_id": id, "count": rep.Count, "since": rep.Since, "until": rep.Until, "refusals": refusals, "report": file}}
	if _, err := m.cfg.Audit.Append(context.WithoutCancel(ctx), rec); err != nil {
		m.cfg.Logger.Error("audit.append_failed", slog.String("op", AuditDNSRefused), slog.Any("err", err))
		return false
	}
	return true
}
