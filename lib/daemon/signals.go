package daemon

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext returns a context cancelled by SIGINT or SIGTERM, and
// ignores SIGPIPE so a peer that hangs up mid-write cannot kill the daemon
// (writes then fail with EPIPE instead). stop releases the signal handlers.
// SIGHUP keeps its default action (the process ends): that is right for a
// command such as hostctl, whose terminal went away; a daemon uses
// DaemonSignalContext.
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	signal.Ignore(syscall.SIGPIPE)
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}

// DaemonSignalContext is SignalContext for a daemon's main: SIGHUP is also
// caught, from here until stop, so that it never ends the process. Under
// systemd a death by SIGHUP counts as a clean stop, which
// Restart=on-failure does not restart. It is caught, not ignored, because
// an ignored signal would be inherited by every program the daemon
// starts. Service.Run logs each SIGHUP that arrives while it serves and
// runs Service.Reload; one that arrives before is dropped.
func DaemonSignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := SignalContext(parent)
	// Never read: the signal package drops a signal whose channel is
	// full, so this buffer only keeps SIGHUP from its default action.
	held := make(chan os.Signal, 1)
	signal.Notify(held, syscall.SIGHUP)
	return ctx, func() { signal.Stop(held); cancel() }
}

// Values of the KeyReload field of the daemon.sighup log line.
const (
	// ReloadNone: the service has no Reload hook; nothing changed.
	ReloadNone = "none"
	// ReloadDone: Service.Reload returned nil.
	ReloadDone = "done"
	// ReloadFailed: Service.Reload returned an error (logged under
	// KeyErr); the daemon goes on with what it had.
	ReloadFailed = "failed"
)

// hangups is the run-group body that answers SIGHUP while s serves: one
// daemon.sighup line per signal, after s.Reload when there is one. It
// returns when ctx ends.
func (s Service) hangups(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		if s.Reload == nil {
			s.Logger.Info("daemon.sighup", slog.String(KeyReload, ReloadNone))
			continue
		}
		if err := s.Reload(ctx); err != nil {
			s.Logger.Warn("daemon.sighup", slog.String(KeyReload, ReloadFailed), slog.Any(KeyErr, err))
			continue
		}
		s.Logger.Info("daemon.sighup", slog.String(KeyReload, ReloadDone))
	}
}
