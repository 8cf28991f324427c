package demo

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
)

// auditDaemons are the daemons whose audit logs the demo reads.
var auditDaemons = []string{daemon.NameSecretd, daemon.NameEgressd, daemon.NameSupervisord}

// maxAuditLines bounds the audit records the transcript shows.
const maxAuditLines = 24

// auditShown are the record fields the transcript shows, in order. The
// records hold no raw value by construction; the demo shows a few names.
var auditShown = []string{"cred", "credential", "credentials", "destination", "target", "origin", "method", "path",
	"status", "bytes", "bytes_out", "mode", "transparent", "handles", "revoked", "reason", "state"}

// pollOps are the read-only calls the demo itself repeats while it waits
// for the agent; the transcript counts them rather than show each one, so
// that the records worth reading fit.
var pollOps = map[string]bool{"instance.logs": true, "instance.status": true}

// stepAudit prints the run's audit records from each daemon's log (read
// from the files, as `hostctl audit tail` does) and verifies each chain.
func (r *runner) stepAudit(context.Context) error {
	r.t.step(9, "the audit trail (read from the files; records never hold a value)")
	var recs []audit.Record
	polls := 0
	for _, d := range auditDaemons {
		rs, err := audit.ReadTail(r.layout.LogDir(d), daemon.AuditFile, 1000)
		if err != nil {
			r.t.fail("read %s's audit log: %v", d, err)
			continue
		}
		for _, rec := range rs {
			switch {
			case rec.Op == "health":
			case d == daemon.NameSupervisord && pollOps[rec.Op] && rec.Outcome == audit.OutcomeOK:
				polls++
			default:
				recs = append(recs, rec)
			}
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Time.Before(recs[j].Time) })
	if polls > 0 {
		r.t.printf("    (%d instance.status and instance.logs calls by the demo, all ok, not shown)\n", polls)
	}
	shown := recs
	if len(shown) > maxAuditLines {
		shown = shown[len(shown)-maxAuditLines:]
		r.t.printf("    (%d earlier records not shown)\n", len(recs)-maxAuditLines)
	}
	for _, rec := range shown {
		r.t.printf("    %s\n", r.auditLine(rec))
	}
	var counts []string
	ok := true
	for _, d := range auditDaemons {
		rep, err := audit.Verify(r.layout.LogDir(d), daemon.AuditFile)
		// secretd and egressd carry the credential's path; supervisord
		// audits only what lib/rpc refuses, so its log may be empty.
		if err != nil || (rep.Records == 0 && d != daemon.NameSupervisord) {
			r.t.fail("audit verify %s: %d records, %v", d, rep.Records, err)
			ok = false
			continue
		}
		counts = append(counts, fmt.Sprintf("%s %d", d, rep.Records))
	}
	if ok {
		r.t.ok("audit verify: every hash chain holds (records: %s)", strings.Join(counts, ", "))
	}
	return nil
}

// auditLine renders one record on one line.
func (r *runner) auditLine(rec audit.Record) string {
	op := rec.Op
	if rec.Phase != audit.PhaseNone {
		op += "/" + string(rec.Phase)
	}
	s := fmt.Sprintf("%-11s #%-3d %-26s %-8s", rec.Daemon, rec.Seq, op, rec.Outcome)
	if rec.Code != "" {
		s += " " + rec.Code
	}
	for _, k := range auditShown {
		if v, ok := rec.Fields[k]; ok {
			s += fmt.Sprintf(" %s=%v", k, v)
		}
	}
	if inv, ok := rec.Fields["invocation"].(string); ok && inv != "" && inv != r.id {
		s += " invocation=" + inv
	}
	return strings.TrimRight(s, " ")
}
