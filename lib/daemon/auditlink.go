package daemon

import (
	"context"
	"log/slog"

	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/rpc"
)

// AuditFile is the active audit file's name in each daemon's log directory.
const AuditFile = "audit.jsonl"

// OpenAudit opens daemon name's audit log at <layout.Log>/<name>/audit.jsonl
// (docs/design.md, "Paths"), fsyncing every record, scrubbing with s.
func OpenAudit(layout Layout, name string, s *redact.Scrubber) (*audit.Log, error) {
	return audit.Open(audit.Options{
		Dir:      layout.LogDir(name),
		Name:     AuditFile,
		Daemon:   name,
		Scrubber: s,
	})
}

// AuditSink adapts an audit log to rpc.Config.Audit: every denial and
// protocol error the rpc server decides becomes one record. A failed append
// is logged, never dropped silently.
func AuditSink(l *audit.Log, log *slog.Logger) func(context.Context, rpc.Event) {
	return func(ctx context.Context, e rpc.Event) {
		op := e.Op
		if op == "" {
			op = "rpc.protocol"
		}
		outcome := audit.OutcomeError
		if e.Outcome == "denied" {
			outcome = audit.OutcomeDenied
		}
		_, err := l.Append(ctx, audit.Record{
			Actor:   audit.Actor{UID: int(e.Peer.UID), PID: int(e.Peer.PID)},
			Op:      op,
			Outcome: outcome,
			Code:    e.Code,
			Corr:    e.Corr,
		})
		if err != nil {
			log.Error("audit.append_failed", slog.String(KeyOp, op), slog.Any(KeyErr, err))
		}
	}
}
