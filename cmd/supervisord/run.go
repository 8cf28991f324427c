package main

import (
	"context"
	"errors"
	"flag"
	"io"

	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
)

// run parses args, builds the daemon and serves until ctx ends. Flags may
// also come from $SUPERVISORD_<FLAG> and the config file.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("supervisord", flag.ContinueOnError)
	roles := daemon.RoleFlags(fs, "admin")
	env, err := daemon.Setup(fs, args, "supervisord", daemon.NameSupervisord, "SUPERVISORD", stdout, stderr)
	if errors.Is(err, daemon.ErrVersionShown) {
		return nil
	}
	if err != nil {
		return err
	}
	r, err := roles()
	if err != nil {
		return err
	}
	name := daemon.NameSupervisord
	alog, err := daemon.OpenAudit(env.Layout, name, env.Scrubber)
	if err != nil {
		return err
	}
	defer alog.Close()
	svc := daemon.Service{
		Name:        daemon.NameSupervisord,
		Socket:      env.Layout.Socket(daemon.NameSupervisord),
		SocketGroup: -1,
		AuditLog:    alog,
		Logger:      env.Logger,
		Roles:       r,
		Ops:         []rpc.Op{daemon.Health(env.Epoch, env.Started, nil)},
	}
	return svc.Run(ctx)
}
