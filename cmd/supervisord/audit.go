package main

import (
	"log/slog"

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
// the admin who made it and the instance it names.
func auditedOps(m *manager.Manager, l *audit.Log, log *slog.Logger) []rpc.Op {
	return daemon.AuditOps(l, log, mutatingOps, instanceField, m.Ops()...)
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
