package main

import (
	"context"
	"errors"
	"flag"
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
	fs := flag.NewFlagSet("containerization-helper", flag.ContinueOnError)
	roles := daemon.RoleFlags(fs, helperapi.RoleClient)
	var allowExe, allowSHA daemon.StringList
	fs.Var(&allowExe, "allow-exe", "executable whose SHA-256 may connect (repeatable; hashed at start); default: hostctl and supervisord next to this binary")
	fs.Var(&allowSHA, "allow-exe-sha256", "SHA-256 (64 hex) of an executable that may connect (repeatable)")
	idle := fs.Duration("idle-timeout", 60*time.Second, "exit after this long without connections or ops under way; 0 never exits")
	runtimeName := fs.String("runtime", "runc", "OCI runtime: runc or crun")
	auditFsync := fs.String("audit-fsync", "always", "audit log fsync policy: always (every record is on disk before the op goes on) or never (the kernel flushes it)")
	env, err := daemon.Setup(fs, args, "containerization-helper", daemon.NameHelper, "CONTAINERIZATION_HELPER", stdout, stderr)
	if errors.Is(err, daemon.ErrVersionShown) {
		return nil
	}
	if err != nil {
		return err
	}
	if *idle < 0 {
		return errors.New("-idle-timeout must be 0 or positive")
	}
	policy, err := fsyncPolicy(*auditFsync)
	if err != nil {
		return err
	}
	r, err := roles()
	if err != nil {
		return err
	}
	log := env.Logger
	self, err := peerauth.NewSelfCheck()
	if err != nil {
		return err
	}
	alog, err := audit.Open(audit.Options{Dir: env.Layout.LogDir(daemon.NameHelper), Name: daemon.AuditFile,
		Daemon: daemon.NameHelper, Scrubber: env.Scrubber, Fsync: policy}) // daemon.OpenAudit, with the policy
	if err != nil {
		return err
	}
	defer alog.Close()
	auth, err := peerauth.New(peerauth.Config{AllowPaths: allowExe, AllowSHA256: allowSHA, Self: self.Path, Logger: log,
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
	srv, err := server.Open(ctx, server.Options{Runtime: *runtimeName, StateDir: env.Layout.StateDir(daemon.NameHelper),
		Epoch: env.Epoch, Started: env.Started, IdleTimeout: *idle, Logger: log, Scrubber: env.Scrubber, Audit: alog})
	if err != nil {
		return err
	}
	defer srv.Close()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	changed := make(chan error, 1) // the own-binary check failed at a connection
	rcfg := rpc.Config{Authenticate: func(p sock.Peer) error {
		if err := self.Check(); err != nil {
			select {
			case changed <- err:
			default:
			}
			return &wire.Error{Code: wire.CodeServerShuttingDown, Msg: "the helper's binary changed; it is restarting", Retry: wire.RetrySafe}
		}
		return auth.Authenticate(p)
	}}
	if *idle > 0 {
		rcfg.IdleAfter, rcfg.OnIdle = *idle, func() { log.Info("helper.idle_exit", slog.Duration("idle", *idle)); stop() }
	}
	svc := daemon.Service{
		Name:        daemon.NameHelper,
		Socket:      env.Layout.Socket(daemon.NameHelper),
		SocketGroup: -1,
		AuditLog:    alog,
		Logger:      log,
		Roles:       r,
		Ops:         srv.Ops(),
		RPC:         rcfg,
		Actors: []daemon.Actor{
			selfActor(sctx, self, changed, log),
		},
	}
	return svc.Run(sctx)
}

// fsyncPolicy parses -audit-fsync (as egressd's): "always" fsyncs every
// audit record before the op goes on (the default: two records per
// mutation, one per other op), "never" leaves flushing to the kernel —
// records then survive a crash of the helper but not of the machine.
func fsyncPolicy(s string) (audit.FsyncPolicy, error) {
	switch s {
	case "always":
		return audit.FsyncAlways, nil
	case "never":
		return audit.FsyncNever, nil
	}
	return 0, fmt.Errorf("-audit-fsync: want always or never, got %q", s)
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
