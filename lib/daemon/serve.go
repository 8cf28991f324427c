package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/oklog/run"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
)

// Actor is one member of a daemon's run group (oklog/run): Execute runs
// until the group stops; Interrupt makes it return.
type Actor struct {
	Execute   func() error // runs until done or interrupted; its return stops the group
	Interrupt func(error)  // makes Execute return; called once, with the error that stops the group
}

// Service is a daemon ready to serve: its socket, op table and extra
// actors. Run listens, serves and stops it.
type Service struct {
	Name        string                           // daemon name: secretd, egressd, supervisord, helper
	Socket      string                           // API socket path
	SocketGroup int                              // group for 0750/0660 multi-user mode; -1 = same-user (0700/0600)
	Logger      *slog.Logger                     // the daemon's redacting logger; required
	Roles       rpc.Roles                        // role → uids allowed to hold it (RoleFlags)
	Ops         []rpc.Op                         // the op table, health included
	Audit       func(context.Context, rpc.Event) // optional audit sink for the server's own decisions
	AuditLog    *audit.Log                       // when Audit is nil: the server's decisions go here (AuditSink)
	RPC         rpc.Config                       // optional overrides: timeouts, MaxConns, IdleAfter/OnIdle
	Actors      []Actor                          // extra actors (sweepers, listeners)
	// Listener, when set, is the socket Run serves, taken earlier with
	// Listen; Run closes it. A daemon takes it before its start-up work
	// (opening its audit log and state, reconciling), so that a second
	// instance on the same root stops with sock.already_running before it
	// touches anything the first one owns.
	Listener *sock.Listener
	// Reload, when set, is called on each SIGHUP that arrives while Run
	// serves, from one goroutine (never two at once), with Run's context;
	// an error is logged and the daemon goes on. Nil: the SIGHUP is logged
	// and nothing else happens. Either way the daemon keeps running.
	Reload func(ctx context.Context) error
}

// Listen takes the service's socket as Run would (a socket passed by
// systemd socket activation, else sock.Listen, whose lock makes a second
// process fail with sock.already_running), for Service.Listener. The
// caller closes it when it returns before Run (Close is idempotent).
// Errors: those of sock.Listen and sock.Activated.
func (s Service) Listen(ctx context.Context) (*sock.Listener, error) { return s.listen(ctx) }

// Run serves s until ctx is cancelled (SignalContext) or an actor fails.
// It uses a socket passed by systemd socket activation when there is one,
// else creates the socket with sock.Listen. It sends READY=1 once the socket
// listens, WATCHDOG=1 while running, STOPPING=1 on the way out, and removes
// the socket it created. Each SIGHUP meanwhile is logged (daemon.sighup)
// and runs Reload; it never stops the daemon. It returns nil on a clean
// stop.
func (s Service) Run(ctx context.Context) error {
	log := s.Logger
	l, err := s.Listener, error(nil)
	if l == nil {
		l, err = s.listen(ctx)
	}
	if err != nil {
		return err
	}
	cfg := s.RPC
	cfg.Daemon, cfg.Roles, cfg.Logger, cfg.Audit = s.Name, s.Roles, log, s.Audit
	if cfg.Audit == nil && s.AuditLog != nil {
		cfg.Audit = AuditSink(s.AuditLog, log)
	}
	srv, err := rpc.NewServer(cfg, s.Ops...)
	if err != nil {
		l.Close()
		return err
	}
	notify := NewNotifier(log)
	var g run.Group
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// STOPPING=1 goes out when shutdown begins, not after the drain.
	g.Add(func() error { <-sctx.Done(); notify.Stopping(); return nil }, func(error) { cancel() })
	g.Add(func() error { return srv.Serve(sctx, l) }, func(error) { cancel() })
	// SIGHUP is answered here (logged, Reload), never a reason to stop.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	g.Add(func() error { s.hangups(sctx, hup); return nil }, func(error) { cancel() })
	wctx, wcancel := context.WithCancel(ctx)
	// An actor that returns stops the group, so this one waits for the end
	// even when no watchdog is configured.
	g.Add(func() error { notify.Watchdog(wctx); <-wctx.Done(); return nil }, func(error) { wcancel() })
	for _, a := range s.Actors {
		g.Add(a.Execute, a.Interrupt)
	}
	log.Info("daemon.ready", slog.String(KeySocket, s.Socket), slog.String("version", Version))
	notify.Ready()
	err = g.Run()
	log.Info("daemon.stopped")
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (s Service) listen(ctx context.Context) (*sock.Listener, error) {
	cfg := sock.Config{Path: s.Socket, Group: s.SocketGroup}
	if s.SocketGroup >= 0 {
		cfg.DirMode, cfg.SocketMode = sock.DirModeGroup, sock.SocketModeGroup
	}
	passed, err := sock.Activated()
	if err != nil {
		return nil, err
	}
	if len(passed) > 0 {
		for _, extra := range passed[1:] {
			extra.Close()
		}
		s.Logger.Info("daemon.socket_activated", slog.String(KeySocket, passed[0].Addr().String()))
		return sock.FromListener(passed[0], cfg), nil
	}
	l, err := sock.Listen(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("daemon: listen on %s: %w", s.Socket, err)
	}
	return l, nil
}
