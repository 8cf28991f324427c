// Package server is the containerization-helper's op table
// (docs/containerization-helper.md, "Ops"): negotiate, observe, image
// evidence, usage, logs, plan, the four plan-confirmed mutations, op.cancel
// and health, over lib/rpc. It is the only caller of the provider, and every
// mutation goes through the same gate: a plan hash from container.plan, an
// idempotency key, and a re-check of identity, capability digest, ownership
// (annotations) and fence before the runtime is asked anything.
//
// Files: deps.go (what it needs from state, image and capability),
// plan.go, mutate.go, observe.go, inflight.go (op.cancel), idem.go
// (idempotency records that outlive the process), recover.go (start-up
// reconciliation), bind.go (Open: the real packages behind deps.go).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"hostkit.dev/cmd/containerization-helper/internal/provider"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// Config wires a Server. Every field but Now and IdleTimeout is required.
type Config struct {
	Runtime provider.RuntimeProvider // the one OCI runtime the helper drives
	// Lookup finds the capability snapshot of a negotiated codec and host
	// kind (capability.Lookup); capability.unavailable when there is none.
	Lookup   func(codec, hostKind string) (Snapshot, error)
	Store    Store     // the persistent state (package state)
	Images   Images    // image verification and unpacking (package image)
	StateDir string    // the helper's state directory: bundles/ and logs/ live here
	Epoch    string    // this process's epoch (health, container records)
	Started  time.Time // when the process started (health's uptime)
	// IdleTimeout is reported by health (0: the helper never exits idle).
	IdleTimeout time.Duration
	Logger      *slog.Logger     // the daemon's redacting logger
	Audit       *audit.Log       // the helper's audit log
	Now         func() time.Time // default time.Now
}

// Server holds the op handlers' shared state. Create with New.
type Server struct {
	cfg      Config
	log      *slog.Logger
	inflight *inflight
	locks    keyedMutex   // one mutation at a time per container id
	closer   func() error // releases the store (Open); nil for New

	mu sync.Mutex
	rt *active // negotiated provider, nil until the first success
}

// active is the negotiated provider and its snapshot.
type active struct {
	info provider.Info
	snap Snapshot
}

// New checks cfg and makes the state directory's bundles/, logs/ and
// rootfs/ (0700).
func New(cfg Config) (*Server, error) {
	if cfg.Runtime == nil || cfg.Lookup == nil || cfg.Store == nil || cfg.Images == nil || cfg.Logger == nil || cfg.Audit == nil || cfg.StateDir == "" {
		return nil, errors.New("server.New: Runtime, Lookup, Store, Images, StateDir, Logger and Audit are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for _, d := range []string{cfg.StateDir, bundlesDir(cfg.StateDir), logsDir(cfg.StateDir), rootfsDir(cfg.StateDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("server.New: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("server.New: %w", err)
		}
	}
	return &Server{cfg: cfg, log: cfg.Logger, inflight: newInflight(), locks: keyedMutex{m: map[string]*keyedEntry{}}}, nil
}

func bundlesDir(state string) string { return filepath.Join(state, "bundles") }
func logsDir(state string) string    { return filepath.Join(state, "logs") }
func rootfsDir(state string) string  { return filepath.Join(state, dirRootfs) }

// bundlePath and logPath are derived from a validated, helper-generated
// id only (validID), never from caller input.
func (s *Server) bundlePath(id string) string { return filepath.Join(bundlesDir(s.cfg.StateDir), id) }
func (s *Server) logPath(id string) string    { return filepath.Join(logsDir(s.cfg.StateDir), id+".log") }

// runtime returns the negotiated provider and its capability snapshot,
// negotiating on first use. A failure (provider.unavailable,
// provider.incompatible, capability.unavailable) is returned as is and
// negotiation is tried again on the next call.
func (s *Server) runtime(ctx context.Context) (*active, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rt != nil {
		return s.rt, nil
	}
	info, err := s.cfg.Runtime.Negotiate(ctx)
	if err != nil {
		return nil, s.mapErr(ctx, err)
	}
	snap, err := s.cfg.Lookup(info.Codec, info.HostKind)
	if err != nil {
		return nil, err
	}
	s.rt = &active{info: info, snap: snap}
	s.log.Info("helper.negotiated", slog.String("provider", info.Name), slog.String("version", info.Version),
		slog.String("codec", info.Codec), slog.String("host_kind", info.HostKind), slog.String("capability_digest", snap.Digest()))
	return s.rt, nil
}

// Close releases what Open opened (the state store and its lock). Call it
// once serving has stopped.
func (s *Server) Close() error {
	if s.closer == nil {
		return nil
	}
	return s.closer()
}

// InFlight reports the number of ops under way.
func (s *Server) InFlight() int { return s.inflight.count() }

// Ops returns the helper's op table: every op needs the client role, the
// mutations need an idempotency key, and every op is audited: a
// before/after pair for the mutations (audited: its syncs overlap the
// store's writes) and op.cancel (daemon.AuditOps), one record for the
// others.
func (s *Server) Ops() []rpc.Op {
	roles := []rpc.Role{helperapi.RoleClient}
	op := func(name string, h rpc.Handler) rpc.Op {
		return rpc.Op{Name: name, Roles: roles, Handler: s.cancellable(h)}
	}
	mutation := func(name string, h rpc.Handler) rpc.Op {
		return rpc.Op{Name: name, Roles: roles, Handler: s.audited(s.durableIdem(s.cancellable(h))), IdemRequired: true}
	}
	ops := daemon.AuditOps(s.cfg.Audit, s.log, map[string]bool{helperapi.OpCancel: true}, auditFields,
		op(helperapi.OpNegotiate, rpc.Handle(s.negotiate)),
		op(helperapi.OpObserve, rpc.Handle(s.observe)),
		op(helperapi.OpEvidence, rpc.Handle(s.evidence)),
		op(helperapi.OpUsage, rpc.Handle(s.usage)),
		op(helperapi.OpLogs, rpc.Handle(s.logs)),
		op(helperapi.OpPlan, rpc.Handle(s.plan)),
		rpc.Op{Name: helperapi.OpCancel, Roles: roles, Handler: rpc.Handle(s.cancel)},
		s.health(),
	)
	return append(ops,
		mutation(helperapi.OpCreate, rpc.Handle(s.create)),
		mutation(helperapi.OpStart, rpc.Handle(s.start)),
		mutation(helperapi.OpRestart, rpc.Handle(s.restart)),
		mutation(helperapi.OpDelete, rpc.Handle(s.delete)),
	)
}

// auditFields draws the non-secret identifiers from a request body: the
// container id, the instance id, the plan kind and hash. Command and
// environment are never read here.
func auditFields(call *rpc.Call) map[string]any {
	var b struct {
		ContainerID string            `msgpack:"container_id"`
		Context     helperapi.Context `msgpack:"context"`
		Kind        string            `msgpack:"kind"`
		PlanHash    string            `msgpack:"plan_hash"`
	}
	if wire.Unmarshal(call.Body, &b, false) != nil {
		return nil
	}
	f := map[string]any{}
	add := func(k, v string) {
		if v != "" && len(v) <= 80 {
			f[k] = v
		}
	}
	if validID(b.ContainerID) {
		add("container_id", b.ContainerID)
	}
	if canonicalUUID(b.Context.InstanceID) {
		add("instance_id", b.Context.InstanceID)
	}
	if validKind(b.Kind) {
		add("kind", b.Kind)
	}
	if validDigest(b.PlanHash) {
		add("plan_hash", b.PlanHash)
	}
	if len(f) == 0 {
		return nil
	}
	return f
}

// health is the `health` op with the helper's fields.
func (s *Server) health() rpc.Op {
	op := daemon.Health(s.cfg.Epoch, s.cfg.Started, func(ctx context.Context) map[string]any {
		m := map[string]any{
			"project_id":      s.cfg.Store.ProjectID(),
			"idle_timeout_ms": s.cfg.IdleTimeout.Milliseconds(),
			"in_flight":       int64(s.inflight.count()),
		}
		if rt, err := s.runtime(ctx); err == nil {
			m["provider"] = rt.info.Name
			m["provider_version"] = rt.info.Version
			m["codec"] = rt.info.Codec
			m["host_kind"] = rt.info.HostKind
			m["capability_digest"] = rt.snap.Digest()
		}
		return m
	})
	op.Roles = []rpc.Role{helperapi.RoleClient}
	op.Handler = s.cancellable(op.Handler)
	return op
}
