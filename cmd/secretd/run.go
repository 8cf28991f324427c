package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"hostkit.dev/cmd/secretd/internal/server"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
)

// run parses args, builds the daemon and serves until ctx ends. Flags may
// also come from $SECRETD_<FLAG> and the config file.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg Config
	return daemon.Run(ctx, daemon.Spec{
		Binary:       "secretd",
		Name:         daemon.NameSecretd,
		Roles:        []rpc.Role{secretdapi.RoleAdmin, secretdapi.RoleStager, secretdapi.RoleConsumer},
		HoldsSecrets: true,
		Flags:        cfg.register,
		Configure: func(_ *daemon.Env, svc *daemon.Service) error {
			if err := cfg.validate(); err != nil {
				return err
			}
			svc.SocketGroup = cfg.socketGID
			return nil
		},
		Serve: func(ctx context.Context, env *daemon.Env, svc *daemon.Service) error {
			d, err := build(env, &cfg)
			if err != nil {
				return err
			}
			defer d.close(context.WithoutCancel(ctx))
			svc.Ops = append([]rpc.Op{daemon.Health(env.Epoch, env.Started, d.srv.Health)}, d.srv.Ops()...)
			svc.Audit = daemon.AuditSink(d.audit, env.Logger)
			svc.Actors = []daemon.Actor{sweeper(ctx, d.srv, cfg.SweepInterval)}
			return svc.Run(ctx)
		},
	}, args, stdout, stderr)
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
