package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"time"

	"hostkit.dev/cmd/secretd/internal/server"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
)

// run parses args, builds the daemon and serves until ctx ends. Flags may
// also come from $SECRETD_<FLAG> and the config file.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("secretd", flag.ContinueOnError)
	roles := daemon.RoleFlags(fs, "admin", "stager", "consumer")
	var cfg Config
	cfg.register(fs)
	env, err := daemon.Setup(fs, args, "secretd", daemon.NameSecretd, "SECRETD", stdout, stderr)
	if errors.Is(err, daemon.ErrVersionShown) {
		return nil
	}
	if err != nil {
		return err
	}
	// This daemon holds secrets: no core dumps, no ptrace by same-user peers.
	if err := daemon.DisableCoreDumps(); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	r, err := roles()
	if err != nil {
		return err
	}
	svc := daemon.Service{Name: daemon.NameSecretd, Socket: env.Layout.Socket(daemon.NameSecretd), SocketGroup: cfg.socketGID, Logger: env.Logger}
	// The socket (and its lock) first: a second secretd on this root stops
	// here, before it opens the credential store or the audit log.
	if svc.Listener, err = svc.Listen(ctx); err != nil {
		return err
	}
	defer svc.Listener.Close()
	d, err := build(env, &cfg)
	if err != nil {
		return err
	}
	defer d.close(context.WithoutCancel(ctx))
	svc.Roles = r
	svc.Ops = append([]rpc.Op{daemon.Health(env.Epoch, env.Started, d.srv.Health)}, d.srv.Ops()...)
	svc.Audit = daemon.AuditSink(d.audit, env.Logger)
	svc.Actors = []daemon.Actor{sweeper(ctx, d.srv, cfg.SweepInterval)}
	return svc.Run(ctx)
}

// sweeper is the run-group actor that zeroes expired leases, drops old
// tombstones and writes flood summaries every interval.
func sweeper(ctx context.Context, srv *server.Server, every time.Duration) daemon.Actor {
	sctx, cancel := context.WithCancel(ctx)
	return daemon.Actor{
		Execute: func() error {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-sctx.Done():
					return nil
				case <-t.C:
					srv.Sweep(sctx)
				}
			}
		},
		Interrupt: func(error) { cancel() },
	}
}

// logStartup writes what secretd loaded, once.
func logStartup(log *slog.Logger, stored, imported int, unused []string) {
	log.Info("secretd.credentials_loaded", slog.Int("stored", stored), slog.Int("systemd", imported))
	if len(unused) > 0 {
		log.Warn("secretd.credentials_unused", slog.Any("files", unused),
			slog.String("hint", "files in $CREDENTIALS_DIRECTORY that hostkit-credentials.json does not name are ignored"))
	}
}
