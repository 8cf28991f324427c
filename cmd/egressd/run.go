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
// also come from $EGRESSD_<FLAG> and the config file.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("egressd", flag.ContinueOnError)
	roles := daemon.RoleFlags(fs, "stager", "client", "admin")
	env, err := daemon.Setup(fs, args, "egressd", daemon.NameEgressd, "EGRESSD", stdout, stderr)
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
	r, err := roles()
	if err != nil {
		return err
	}
	svc := daemon.Service{
		Name:        daemon.NameEgressd,
		Socket:      env.Layout.Socket(daemon.NameEgressd),
		SocketGroup: -1,
		Logger:      env.Logger,
		Roles:       r,
		Ops:         []rpc.Op{daemon.Health(env.Epoch, env.Started, nil)},
	}
	return svc.Run(ctx)
}
