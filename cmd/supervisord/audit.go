package main

import (
	"context"
	"log/slog"
	"sync"

	"hostkit.dev/cmd/supervisord/internal/manager"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// mutatingOps get a before/after audit pair; the rest one record each.
var mutatingOps = map[string]bool{
	api.OpProvision: true, api.OpStop: true, api.OpDestroy: true, api.OpSignal: true,
}

// auditedOps wraps the manager's ops so every instance op is audited with
// the admin who made it and the instance it names: daemon.AuditOps, except
// for provision (auditProvision), whose records also name the network
// mode of a host instance (the request's, else defaultNetwork), so that
// every agent that runs on the host network is on the record.
func auditedOps(m *manager.Manager, l *audit.Log, log *slog.Logger, defaultNetwork string) []rpc.Op {
	ops := m.Ops()
	out := make([]rpc.Op, 0, len(ops))
	for _, op := range ops {
		if op.Name == api.OpProvision {
			out = append(out, auditProvision(l, log, op, func(call *rpc.Call) map[string]any { return provisionFields(call, defaultNetwork) }))
			continue
		}
		out = append(out, daemon.AuditOps(l, log, mutatingOps, instanceField, op)...)
	}
	return out
}

// auditProvision is daemon.AuditOps for provision, with the same records
// in the same order: the "before" record is written (and fsynced) before
// the handler runs, and a provision whose before record cannot be written
// does not run. The "after" record is written as soon as the outcome is
// known: when the handler calls its manager.WithDecided function (the
// agent runs), the after record's write and fsync overlap the provision's
// last steps (the instance record's fsyncs, the post-spawn metadata). The
// answer still waits for both, so nothing is acknowledged before its
// records are durable.
func auditProvision(l *audit.Log, log *slog.Logger, op rpc.Op, fields func(*rpc.Call) map[string]any) rpc.Op {
	inner := op.Handler
	op.Handler = func(ctx context.Context, call *rpc.Call) (any, error) {
		rec := audit.Record{Actor: audit.Actor{UID: int(call.Peer.UID), PID: int(call.Peer.PID)}, Op: call.Op, Corr: call.Corr, Fields: fields(call)}
		pair, aerr := l.Begin(ctx, rec)
		if aerr != nil {
			log.Error("audit.append_failed", slog.String(daemon.KeyOp, call.Op), slog.Any(daemon.KeyErr, aerr))
			return nil, wire.Wrap(wire.CodeInternal, "the audit log cannot record this change", aerr)
		}
		var once sync.Once
		ended := make(chan struct{})
		end := func(err error) {
			once.Do(func() {
				go func() {
					defer close(ended)
					outcome, code := daemon.AuditOutcome(err)
					if _, aerr := pair.End(context.WithoutCancel(ctx), outcome, code, rec.Fields); aerr != nil { // the outcome is written even when the caller gave up
						log.Error("audit.append_failed", slog.String(daemon.KeyOp, call.Op), slog.Any(daemon.KeyErr, aerr))
					}
				}()
			})
		}
		v, err := inner(manager.WithDecided(ctx, func() { end(nil) }), call)
		end(err) // no-op when the handler decided already (it then succeeds)
		<-ended
		return v, err
	}
	return op
}

// instanceField names the instance a call is about (never its env or
// command line, which may hold anything the admin typed).
func instanceField(call *rpc.Call) map[string]any {
	var ref struct {
		InstanceID string `msgpack:"instance_id"`
	}
	if wire.Unmarshal(call.Body, &ref, false) != nil || ref.InstanceID == "" {
		return nil
	}
	return map[string]any{"instance_id": ref.InstanceID}
}

// provisionFields is instanceField plus, for a host runtime request, the
// network mode it runs in ("network": isolated or host; an absent mode is
// defaultNetwork). A request that cannot be decoded gets instanceField's.
func provisionFields(call *rpc.Call, defaultNetwork string) map[string]any {
	var req struct {
		InstanceID string       `msgpack:"instance_id"`
		Network    *api.Network `msgpack:"network"`
		Runtime    string       `msgpack:"runtime"`
	}
	if wire.Unmarshal(call.Body, &req, false) != nil || (req.Runtime != "" && req.Runtime != api.RuntimeHost) {
		return instanceField(call)
	}
	f := map[string]any{"network": defaultNetwork}
	if req.Network != nil && req.Network.Mode != "" {
		f["network"] = req.Network.Mode
	}
	if req.InstanceID != "" {
		f["instance_id"] = req.InstanceID
	}
	return f
}
