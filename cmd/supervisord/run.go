package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"

	"hostkit.dev/cmd/supervisord/internal/manager"
	"hostkit.dev/cmd/supervisord/internal/netns"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// boolish is a flag value accepting 1/true/yes and 0/false/no (Go's bool
// parsing refuses yes).
type boolish bool

func (b *boolish) String() string { return fmt.Sprint(bool(*b)) }

func (b *boolish) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		*b = true
	case "0", "false", "no", "off", "":
		*b = false
	default:
		return fmt.Errorf("want 1, true or yes (or 0, false, no), got %q", s)
	}
	return nil
}

// run parses args, builds the daemon and serves until ctx ends. Flags may
// also come from $SUPERVISORD_<FLAG> and the config file.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("supervisord", flag.ContinueOnError)
	roles := daemon.RoleFlags(fs, "admin")
	var hostRuntime boolish
	fs.Var(&hostRuntime, "host-runtime-enabled", "run agents as host processes (1, true or yes); off: runtime host fails with runtime.not_implemented")
	uidMin := fs.Int("agent-uid-min", 61184, "lowest agent uid (when root)")
	uidMax := fs.Int("agent-uid-max", 65519, "highest agent uid (when root)")
	workDir := fs.String("default-working-dir", "/", "working directory for instances whose request names none")
	logMB := fs.Int("log-max-mb", 10, "size cap of one instance output log file, MiB")
	logFiles := fs.Int("log-files", 3, "instance output log files kept, the current one included")
	eflags := egressFlags(fs)
	synthNames := fs.Int("synthetic-names", netns.DefaultMaxNames, "names one isolated instance's resolver gives synthetic addresses to (past it: REFUSED, audited)")
	defNet := fs.String("default-network", api.DefaultNetwork, "network mode of a host instance whose request names none: isolated (its own network and mount namespaces; only egressd is reachable) or host (egress policy holds only for programs that honour the proxy variables)")
	proxySock := fs.String("egress-proxy-socket", "", "egressd's proxy socket, bridged into network isolated namespaces (default <run>/egressd/proxy.sock)")
	tmuxBin := fs.String("tmux", "tmux", "the tmux binary of session_backend tmux")
	helperSock := fs.String("helper-socket", "", "the containerization-helper's socket, for runtime container (default <run>/helper/api.sock; none: runtime container fails with runtime.unavailable)")
	pool := fs.Int("holder-pool", 2, "holders kept started and idle, so a provision skips a holder's exec and start-up (0: off)")
	env, err := daemon.Setup(fs, args, "supervisord", daemon.NameSupervisord, "SUPERVISORD", stdout, stderr)
	if errors.Is(err, daemon.ErrVersionShown) {
		return nil
	}
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *pool < 0 || *pool > manager.MaxHolderPool {
		return fmt.Errorf("-holder-pool: want 0-%d, got %d", manager.MaxHolderPool, *pool)
	}
	if *defNet != api.NetworkIsolated && *defNet != api.NetworkHost {
		return fmt.Errorf("-default-network: want isolated or host, got %q", *defNet)
	}
	if *uidMin < 1000 || *uidMax < *uidMin {
		return fmt.Errorf("-agent-uid-min/-agent-uid-max: bad range %d-%d", *uidMin, *uidMax)
	}
	r, err := roles()
	if err != nil {
		return err
	}
	name := daemon.NameSupervisord
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	socket := env.Layout.Socket(name)
	if err := env.Layout.EnsurePublic(); err != nil {
		return err
	}
	svc := daemon.Service{Name: name, Socket: socket, SocketGroup: -1, Logger: env.Logger}
	// The socket (and its lock) first: a second supervisord on this root
	// stops here, before it opens the audit log or reconciles instances.
	if svc.Listener, err = svc.Listen(ctx); err != nil {
		return err
	}
	defer svc.Listener.Close()
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
	eg := eflags.client(env.Layout, env.Logger, owner)
	defer eg.Close()
	mgr, err := manager.New(manager.Config{Egress: eg, Audit: alog,
		HostRuntimeEnabled: bool(hostRuntime), StateDir: stateDir,
		HolderDir: filepath.Join(filepath.Dir(socket), "h"), Exe: exe, DefaultWorkingDir: *workDir,
		UIDMin: *uidMin, UIDMax: *uidMax, LogMaxMB: *logMB, LogFiles: *logFiles, Logger: env.Logger,
		ProxySocket: cmp.Or(*proxySock, filepath.Join(env.Layout.Run, daemon.NameEgressd, "proxy.sock")), Tmux: *tmuxBin,
		HolderPool: *pool, SyntheticNames: *synthNames, DefaultNetwork: *defNet,
		Containers:    containers(env.Layout, *helperSock, env.Logger),
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
	svc.AuditLog, svc.Roles = alog, r
	svc.Ops = append([]rpc.Op{daemon.Health(env.Epoch, env.Started, health)}, auditedOps(mgr, alog, env.Logger, *defNet)...)
	svc.Actors = []daemon.Actor{eflags.watcher(ctx, eg, mgr.OnEgressEpoch), loopActor(ctx, mgr.RunPool), loopActor(ctx, mgr.RunEgressSweep),
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
