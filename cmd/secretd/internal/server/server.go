// Package server is secretd's op table: credential.* for admins,
// lease.stage/revoke/lookup for stagers, lease.list for both, and
// lease.consume for consumers (docs/design.md, "Peers and roles"), each
// audited on success and failure with handle fingerprints, never values or
// handles.
package server

import (
	"context"
	"log/slog"
	"time"

	"hostkit.dev/cmd/secretd/internal/credential"
	"hostkit.dev/cmd/secretd/internal/lease"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// Config holds the Server's dependencies.
type Config struct {
	Registry    *credential.Registry // the credentials (store and systemd)
	Leases      *lease.Table         // the lease table
	Alloc       *secmem.Allocator    // locked memory for values
	Logger      *slog.Logger         // required (the redacting logger)
	Audit       Auditor              // nil: log only
	FloodWindow time.Duration        // bogus-handle refusals: one record per peer uid per window; default 1 s
	Now         func() time.Time     // default time.Now
}

// Server implements secretd's ops.
type Server struct {
	reg   *credential.Registry
	table *lease.Table
	alloc *secmem.Allocator
	log   *slog.Logger
	audit Auditor
	flood *flood
}

// New returns a Server. FloodWindow defaults to one second.
func New(cfg Config) *Server {
	if cfg.FloodWindow <= 0 {
		cfg.FloodWindow = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Server{reg: cfg.Registry, table: cfg.Leases, alloc: cfg.Alloc, log: cfg.Logger, audit: cfg.Audit,
		flood: newFlood(cfg.FloodWindow, cfg.Now)}
}

// Ops returns the op table with the roles of docs/design.md, "Peers and
// roles".
func (s *Server) Ops() []rpc.Op {
	admin := []rpc.Role{secretdapi.RoleAdmin}
	stager := []rpc.Role{secretdapi.RoleStager}
	return []rpc.Op{
		{Name: secretdapi.OpCredentialPut, Roles: admin, Handler: s.credentialPut},
		{Name: secretdapi.OpCredentialDelete, Roles: admin, Handler: handle(s, s.credentialDelete)},
		{Name: secretdapi.OpCredentialList, Roles: admin, Handler: handle(s, s.credentialList)},
		{Name: secretdapi.OpLeaseStage, Roles: stager, Handler: handle(s, s.leaseStage)},
		{Name: secretdapi.OpLeaseRevoke, Roles: stager, Handler: handle(s, s.leaseRevoke)},
		{Name: secretdapi.OpLeaseLookup, Roles: stager, Handler: handle(s, s.leaseLookup)},
		{Name: secretdapi.OpLeaseList, Roles: []rpc.Role{secretdapi.RoleAdmin, secretdapi.RoleStager}, Handler: handle(s, s.leaseList)},
		{Name: secretdapi.OpLeaseConsume, Roles: []rpc.Role{secretdapi.RoleConsumer}, Handler: handle(s, s.leaseConsume)},
	}
}

// Health returns the fields secretd adds to `health`.
func (s *Server) Health(context.Context) map[string]any {
	leases, tombs := s.table.Counts()
	mlock := "locked"
	if s.alloc.Degraded() {
		mlock = "degraded"
	}
	return map[string]any{"leases": leases, "tombstones": tombs, "credentials": s.reg.Len(), "mlock": mlock}
}

// Sweep removes expired leases and tombstones and writes due flood
// summaries; the run group calls it every sweep interval.
func (s *Server) Sweep(ctx context.Context) {
	if n, _ := s.table.Sweep(); n > 0 {
		s.log.Info("lease.swept", slog.Int("expired", n))
	}
	s.FlushFloods(ctx, false)
}

// handle is rpc.Handle for secretd's ops, which audit every refusal: a
// body that does not decode never reaches fn, so its refusal is audited
// here, without fields (nothing of the body is known).
func handle[Req, Resp any](s *Server, fn func(context.Context, *rpc.Call, *Req) (Resp, error)) rpc.Handler {
	return func(ctx context.Context, call *rpc.Call) (any, error) {
		req, err := rpc.Decode[Req](call)
		if err != nil {
			return nil, s.finish(ctx, call, err, nil)
		}
		resp, err := fn(ctx, call, req)
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// finish audits one op's outcome and passes err through.
func (s *Server) finish(ctx context.Context, call *rpc.Call, err error, fields map[string]any) error {
	ev := Event{Op: call.Op, Peer: call.Peer, Outcome: OutcomeOK, Corr: call.Corr, Fields: fields}
	if err != nil {
		ev.Code = wire.CodeOf(err)
		ev.Outcome = OutcomeRefused
		if ev.Code == wire.CodeInternal {
			ev.Outcome = OutcomeError
		}
	}
	s.record(ctx, ev)
	return err
}

// bogus reports whether code means the caller presented a handle that was
// never (or is no longer) usable: such refusals are flood-aggregated.
func bogus(code string) bool {
	switch code {
	case secretdapi.CodeLeaseInvalidHandle, secretdapi.CodeLeaseStaleEpoch, secretdapi.CodeLeaseNotFound, secretdapi.CodeLeaseConsumed:
		return true
	}
	return false
}

// finishBogus audits a bogus-handle refusal through the flood gate.
func (s *Server) finishBogus(ctx context.Context, call *rpc.Call, err error, fields map[string]any) error {
	write, due := s.flood.admit(call.Peer, wire.CodeOf(err))
	if due != nil {
		s.record(ctx, *due)
	}
	if write {
		return s.finish(ctx, call, err, fields)
	}
	return err
}
