package main

import (
	"cmp"
	"context"
	"io"
	"os"
	"path/filepath"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"

	"hostkit.dev/cmd/supervisord/internal/manager"
	"hostkit.dev/cmd/supervisord/internal/netns"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// run parses args, builds the daemon and serves until ctx ends. Flags may
// also come from $SUPERVISORD_<FLAG> and the config file.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f flags
	return daemon.Run(ctx, daemon.Spec{
		Binary: "supervisord",
		Name:   daemon.NameSupervisord,
		Roles:  []rpc.Role{api.RoleAdmin},
		Flags:  f.register,
		Configure: func(env *daemon.Env, _ *daemon.Service) error {
			if err := f.check(); err != nil {
				return err
			}
			// The directories agents reach (run, public): 0755 whatever
			// the umask.
			return env.Layout.EnsurePublic()
		},
		Serve: func(ctx context.Context, env *daemon.Env, svc *daemon.Service) error {
			return serve(ctx, env, svc, &f)
		},
	}, args, stdout, stderr)
}

// serve builds supervisord on the socket daemon.Run took (so a second
// supervisord on this root has stopped before it opens the audit log or
// reconciles instances) and serves until ctx ends.
func serve(ctx context.Context, env *daemon.Env, svc *daemon.Service, f *flags) error {
	name := daemon.NameSupervisord
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	stateDir := env.Layout.StateDir(name)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	// The owner id every lease and bundle of ours carries, the same at
	// every start (docs/supervisord.md, "Egress").
	owner, err := store.LoadOwner(stateDir)
	if err != nil {
		return err
	}
	alog, err := daemon.OpenAudit(env.Layout, name, env.Scrubber)
	if err != nil {
		return err
	}
	defer alog.Close()
	eg := f.egress.client(env.Layout, env.Logger, owner)
	defer eg.Close()
	mgr, err := manager.New(manager.Config{Egress: eg, Audit: alog,
		HostRuntimeEnabled: bool(f.hostRuntime), StateDir: stateDir,
		HolderDir: filepath.Join(filepath.Dir(svc.Socket), "h"), Exe: exe, DefaultWorkingDir: f.workDir,
		UIDMin: f.uidMin, UIDMax: f.uidMax, LogMaxMB: f.logMB, LogFiles: f.logFiles, Logger: env.Logger,
		ProxySocket: cmp.Or(f.proxySock, filepath.Join(env.Layout.Run, daemon.NameEgressd, "proxy.sock")), Tmux: f.tmuxBin,
		HolderPool: f.pool, SyntheticNames: f.synthNames, DefaultNetwork: f.defNet,
		Containers:    containers(env.Layout, f.helperSock, env.Logger),
		ProbeNftables: netns.ProbeNftables,
	})
	if err != nil {
		return err
	}
	mgr.Reconcile(ctx)
	if w := mgr.Warning(); w != "" {
		env.Logger.Warn("supervisord.not_isolated", "warning", w)
	}
	health := func(context.Context) map[string]any { return withEgress(mgr.Health(), eg) }
	svc.AuditLog = alog
	svc.Ops = append([]rpc.Op{daemon.Health(env.Epoch, env.Started, health)}, auditedOps(mgr, alog, env.Logger, f.defNet)...)
	svc.Actors = []daemon.Actor{f.egress.watcher(ctx, eg, mgr.OnEgressEpoch), loopActor(ctx, mgr.RunPool), loopActor(ctx, mgr.RunEgressSweep),
		loopActor(ctx, mgr.RunRecovery), loopActor(ctx, mgr.RunReregister), loopActor(ctx, mgr.RunDNSAudit)}
	return svc.Run(ctx)
}

// loopActor is the run-group actor of a loop that runs until its context
// ends: the holder pool (which ends its idle holders on shutdown) and the
// egress sweep.
func loopActor(ctx context.Context, loop func(context.Context)) daemon.Actor {
	lctx, cancel := context.WithCancel(ctx)
	return daemon.Actor{
		Execute:   func() error { loop(lctx); return nil },
		Interrupt: func(error) { cancel() },
	}
}
