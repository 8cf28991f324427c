package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"hostkit.dev/lib/rpc"
)

// Spec describes a daemon binary for Run: its names, its roles, and the
// steps of its start-up that are its own.
type Spec struct {
	// Binary is the program name ("containerization-helper"): the flag
	// set's, -version's and the config file's (<binary>.conf). Its
	// environment prefix is Binary upper-cased with '-' as '_'
	// ($CONTAINERIZATION_HELPER_<FLAG>).
	Binary string
	// Name is the daemon's name in the layout and its logs: NameSecretd,
	// NameEgressd, NameSupervisord or NameHelper.
	Name string
	// Roles each get a -<role>-users flag (RoleFlags), resolved before
	// Configure. Use the constants of the daemon's lib/api package.
	Roles []rpc.Role
	// HoldsSecrets turns core dumps and same-user ptrace off
	// (DisableCoreDumps) right after the flags are parsed, before
	// anything is read.
	HoldsSecrets bool
	// Flags registers the daemon's own flags; nil: it has none.
	Flags func(fs *flag.FlagSet)
	// Configure checks the daemon's flags once parsed and may set
	// svc.SocketGroup (-1, same-user, unless it does) or prepare what
	// must exist before the socket does. It runs before the socket is
	// taken, so a bad flag leaves no socket behind. Nil: nothing to check.
	Configure func(env *Env, svc *Service) error
	// Serve runs with the socket taken (svc.Listener): it builds the
	// daemon, completes svc (Ops, Audit or AuditLog, Actors, RPC) and
	// returns svc.Run's result. Required.
	Serve func(ctx context.Context, env *Env, svc *Service) error
}

// Run is the start-up every daemon shares, around d's own steps: it
// parses args into the common flags, a -<role>-users flag per role and
// d's flags (Setup); returns nil once -version has printed the version;
// refuses positional arguments (a usage error: ExitStatus 2), since the
// flag package stops at the first one and would silently ignore every
// flag after it; turns core dumps off when d holds secrets; resolves the
// roles; runs Configure; and takes the socket (Service.Listen),
// so that a second instance on the same root stops with
// sock.already_running before Serve opens anything the first one owns.
// Serve then gets a Service with its name, socket, logger, roles and
// listener set. The listener is closed when Run returns. Errors: those of
// each step, returned as they are.
func Run(ctx context.Context, d Spec, args []string, stdout, stderr io.Writer) error {
	if d.Serve == nil {
		return errors.New("daemon.Run: Spec.Serve is required")
	}
	fs := flag.NewFlagSet(d.Binary, flag.ContinueOnError)
	roles := RoleFlags(fs, d.Roles...)
	if d.Flags != nil {
		d.Flags(fs)
	}
	env, err := Setup(fs, args, d.Binary, d.Name, envPrefix(d.Binary), stdout, stderr)
	if errors.Is(err, ErrVersionShown) {
		return nil
	}
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %q", fs.Args())}
	}
	if d.HoldsSecrets {
		if err := DisableCoreDumps(); err != nil {
			return err
		}
	}
	svc := &Service{Name: d.Name, Socket: env.Layout.Socket(d.Name), SocketGroup: -1, Logger: env.Logger}
	if svc.Roles, err = roles(); err != nil {
		return err
	}
	if d.Configure != nil {
		if err := d.Configure(env, svc); err != nil {
			return err
		}
	}
	if svc.Listener, err = svc.Listen(ctx); err != nil {
		return err
	}
	defer svc.Listener.Close()
	return d.Serve(ctx, env, svc)
}

// envPrefix is binary's environment variable prefix: "secretd" →
// "SECRETD", "containerization-helper" → "CONTAINERIZATION_HELPER".
func envPrefix(binary string) string {
	return strings.ToUpper(strings.ReplaceAll(binary, "-", "_"))
}
