package daemon

import (
	"context"
	"log/slog"

	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// AuditOps wraps each op's handler so every call is audited with the peer,
// the correlation id, the outcome and the error code: a before/after pair
// (audit.Log.Begin / Pair.End) for the ops named in mutating — the before
// record is written before the handler runs, and a mutation whose before
// record cannot be written does not run (internal) — and one record after
// the handler for the others. A read that succeeded changed nothing, so its
// record is written at once but not synced on its own
// (audit.Log.AppendLazy: durable with the next synced record); a refused
// or failed one is synced before the answer, as every mutation's. fields, when not nil, adds fields drawn from
// the call (e.g. the instance id); it must not return secret material.
func AuditOps(l *audit.Log, log *slog.Logger, mutating map[string]bool, fields func(*rpc.Call) map[string]any, ops ...rpc.Op) []rpc.Op {
	out := make([]rpc.Op, len(ops))
	for i, op := range ops {
		inner := op.Handler
		mut := mutating[op.Name]
		op.Handler = func(ctx context.Context, call *rpc.Call) (any, error) {
			rec := audit.Record{Actor: audit.Actor{UID: int(call.Peer.UID), PID: int(call.Peer.PID)}, Op: call.Op, Corr: call.Corr}
			if fields != nil {
				rec.Fields = fields(call)
			}
			if !mut {
				v, err := inner(ctx, call)
				rec.Outcome, rec.Code = AuditOutcome(err)
				appendRec := l.Append
				if err == nil {
					appendRec = l.AppendLazy
				}
				if _, aerr := appendRec(context.WithoutCancel(ctx), rec); aerr != nil {
					log.Error("audit.append_failed", slog.String(KeyOp, call.Op), slog.Any(KeyErr, aerr))
				}
				return v, err
			}
			pair, aerr := l.Begin(ctx, rec)
			if aerr != nil {
				log.Error("audit.append_failed", slog.String(KeyOp, call.Op), slog.Any(KeyErr, aerr))
				return nil, wire.Wrap(wire.CodeInternal, "the audit log cannot record this change", aerr)
			}
			v, err := inner(ctx, call)
			outcome, code := AuditOutcome(err)
			// Not under the request's deadline: the op may have acted,
			// and its outcome is written even when the caller gave up.
			if _, aerr := pair.End(context.WithoutCancel(ctx), outcome, code, rec.Fields); aerr != nil {
				log.Error("audit.append_failed", slog.String(KeyOp, call.Op), slog.Any(KeyErr, aerr))
			}
			return v, err
		}
		out[i] = op
	}
	return out
}

// AuditOutcome maps a handler's error to an audit outcome and code: nil is
// ok, peer.denied is denied, any other code is error with that code.
func AuditOutcome(err error) (audit.Outcome, string) {
	switch code := wire.CodeOf(err); code {
	case "":
		return audit.OutcomeOK, ""
	case wire.CodePeerDenied:
		return audit.OutcomeDenied, code
	default:
		return audit.OutcomeError, code
	}
}
