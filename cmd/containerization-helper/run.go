package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"hostkit.dev/cmd/containerization-helper/internal/peerauth"
	"hostkit.dev/cmd/containerization-helper/internal/server"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// selfCheckEvery is how often the helper checks that its own binary on
// disk is still the one it runs (it also checks at each new connection).
const selfCheckEvery = 5 * time.Second

// run parses args, builds the daemon and serves until ctx ends, the
// helper has been idle for -idle-timeout (exit 0), or its own binary
// changed on disk (exit non-zero, so the service manager starts the new
// one). Flags may also come from $CONTAINERIZATION_HELPER_<FLAG> and the
// config file.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f flags
	return daemon.Run(ctx, daemon.Spec{
		Binary:    "containerization-helper",
		Name:      daemon.NameHelper,
		Roles:     []rpc.Role{helperapi.RoleClient},
		Flags:     f.register,
		Configure: func(*daemon.Env, *daemon.Service) error { return f.check() },
		Serve: func(ctx context.Context, env *daemon.Env, svc *daemon.Service) error {
			return serve(ctx, env, svc, &f)
		},
	}, args, stdout, stderr)
}

// serve builds the helper on the socket daemon.Run took and serves until
// ctx ends, the helper is idle or its binary changed.
func serve(ctx context.Context, env *daemon.Env, svc *daemon.Service, f *flags) error {
	log := env.Logger
	self, err := peerauth.NewSelfCheck()
	if err != nil {
		return err
	}
	alog, err := audit.Open(audit.Options{Dir: env.Layout.LogDir(daemon.NameHelper), Name: daemon.AuditFile,
		Daemon: daemon.NameHelper, Scrubber: env.Scrubber, Fsync: f.fsync}) // daemon.OpenAudit, with the policy
	if err != nil {
		return err
	}
	defer alog.Close()
	auth, err := peerauth.New(peerauth.Config{AllowPaths: f.allowExe, AllowSHA256: f.allowSHA, Self: self.Path, Logger: log,
		OnDenied: func(p sock.Peer, reason, exe string) {
			rec := audit.Record{Actor: audit.Actor{UID: int(p.UID), PID: int(p.PID)}, Op: "peer.authenticate", Outcome: audit.OutcomeDenied,
				Code: "peer.denied", Fields: map[string]any{"reason": reason, "exe": exe}}
			if _, err := alog.Append(context.WithoutCancel(ctx), rec); err != nil {
				log.Error("audit.append_failed", slog.String(daemon.KeyOp, rec.Op), slog.Any(daemon.KeyErr, err))
			}
		}})
	if err != nil {
		return err
	}
	log.Info("helper.allowlist", slog.Any("exe_sha256", auth.Allowed()))
	srv, err := server.Open(ctx, server.Options{Runtime: f.runtime, StateDir: env.Layout.StateDir(daemon.NameHelper),
		Epoch: env.Epoch, Started: env.Started, IdleTimeout: f.idle, Logger: log, Scrubber: env.Scrubber, Audit: alog})
	if err != nil {
		return err
	}
	defer srv.Close()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	changed := make(chan error, 1) // the own-binary check failed at a connection
	svc.RPC = rpc.Config{Authenticate: func(p sock.Peer) error {
		if err := self.Check(); err != nil {
			select {
			case changed <- err:
			default:
			}
			return &wire.Error{Code: wire.CodeServerShuttingDown, Msg: "the helper's binary changed; it is restarting", Retry: wire.RetrySafe}
		}
		return auth.Authenticate(p)
	}}
	if f.idle > 0 {
		svc.RPC.IdleAfter, svc.RPC.OnIdle = f.idle, func() { log.Info("helper.idle_exit", slog.Duration("idle", f.idle)); stop() }
	}
	svc.AuditLog = alog
	svc.Ops = srv.Ops()
	svc.Actors = []daemon.Actor{selfActor(sctx, self, changed, log)}
	return svc.Run(sctx)
}

// selfActor checks the helper's own binary every selfCheckEvery and when
// a connection found it changed; a change stops the daemon with an error
// (exit status 1), so the old code never serves on.
func selfActor(ctx context.Context, self *peerauth.SelfCheck, changed <-chan error, log *slog.Logger) daemon.Actor {
	actx, cancel := context.WithCancel(ctx)
	return daemon.Actor{Execute: func() error {
		t := time.NewTicker(selfCheckEvery)
		defer t.Stop()
		for {
			var err error
			select {
			case <-actx.Done():
				return nil
			case err = <-changed:
			case <-t.C:
				err = self.Check()
			}
			if err != nil {
				log.Error("helper.binary_changed", slog.String("path", self.Path), slog.String("err", err.Error()),
					slog.String("action", "stop serving and exit 1; the service manager starts the new binary"))
				return fmt.Errorf("own binary changed on disk: %w", err)
			}
		}
	}, Interrupt: func(error) { cancel() }}
}
