package server

import (
	"context"
	"log/slog"

	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// auditKey is the context key under which audited hands a mutation its
// *auditPair.
type auditKey struct{}

// auditPair is one mutation's before/after audit records, whose syncs
// share the time of the store's own writes instead of adding to it: the
// before record is written when the op arrives and synced by begin at the
// same time as the store's write that precedes any action (both are
// durable before the runtime is asked); the after record is written by
// durableIdem and synced at the same time as the store's write that
// precedes the answer (both are durable before it leaves). A mutation
// refused before it acted, or one durableIdem keeps nothing for, gets its
// after record, synced, from audited itself.
type auditPair struct {
	log    *audit.Log
	pair   audit.Pair
	fields map[string]any
	ended  bool
}

// audited wraps a mutation's handler with its audit pair (see auditPair).
// A mutation whose before record cannot be written does not run
// (internal), as under daemon.AuditOps.
func (s *Server) audited(h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, call *rpc.Call) (any, error) {
		rec := audit.Record{Actor: audit.Actor{UID: int(call.Peer.UID), PID: int(call.Peer.PID)}, Op: call.Op, Corr: call.Corr, Fields: auditFields(call)}
		pair, err := s.cfg.Audit.BeginLazy(ctx, rec)
		if err != nil {
			s.log.Error("audit.append_failed", slog.String(daemon.KeyOp, call.Op), slog.Any(daemon.KeyErr, err))
			return nil, wire.Wrap(wire.CodeInternal, "the audit log cannot record this change", err)
		}
		a := &auditPair{log: s.cfg.Audit, pair: pair, fields: rec.Fields}
		// Not under the request's deadline: the op may have acted, and its
		// outcome is written even when the caller gave up.
		bg := context.WithoutCancel(ctx)
		defer func() {
			if r := recover(); r != nil { // lib/rpc answers internal; the pair still closes
				if !a.ended {
					_, _ = pair.End(bg, audit.OutcomeError, wire.CodeInternal, rec.Fields)
				}
				panic(r)
			}
		}()
		v, err := h(context.WithValue(ctx, auditKey{}, a), call)
		if !a.ended {
			outcome, code := daemon.AuditOutcome(err)
			if _, aerr := pair.End(bg, outcome, code, rec.Fields); aerr != nil {
				s.log.Error("audit.append_failed", slog.String(daemon.KeyOp, call.Op), slog.Any(daemon.KeyErr, aerr))
				return nil, errAuditUnsynced
			}
		}
		return v, err
	}
}

// endLazy writes ctx's after record for the handler's error, unsynced
// (withAuditSync syncs it), and reports whether it was written; without a
// pair in ctx it does nothing and reports true. A record that could not
// be written is logged; the caller must not answer with the op's result.
func (s *Server) endLazy(ctx context.Context, err error) bool {
	a, _ := ctx.Value(auditKey{}).(*auditPair)
	if a == nil {
		return true
	}
	a.ended = true
	outcome, code := daemon.AuditOutcome(err)
	if _, aerr := a.pair.EndLazy(context.WithoutCancel(ctx), outcome, code, a.fields); aerr != nil {
		s.log.Error("audit.append_failed", slog.Any(daemon.KeyErr, aerr))
		return false
	}
	return true
}

// withAuditSync runs write and, when ctx carries an audit pair, the audit
// log's sync at the same time (the two files' syncs overlap; on ext4 they
// share a journal commit), and returns write's error and the sync's.
func withAuditSync(ctx context.Context, write func() error) (werr, serr error) {
	a, _ := ctx.Value(auditKey{}).(*auditPair)
	if a == nil {
		return write(), nil
	}
	synced := make(chan error, 1)
	go func() { synced <- a.log.Sync() }()
	werr = write()
	return werr, <-synced
}
