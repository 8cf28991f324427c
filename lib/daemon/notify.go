package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends sd_notify(3) messages to the service manager. A missing
// NOTIFY_SOCKET makes every call a no-op.
type Notifier struct {
	log *slog.Logger
}

// NewNotifier returns a Notifier that logs send failures to log.
func NewNotifier(log *slog.Logger) *Notifier { return &Notifier{log: log} }

func (n *Notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.log.Warn("daemon.notify_failed", slog.String("state", state), slog.Any(KeyErr, err))
	}
}

// Ready sends READY=1 (call once the socket is listening).
func (n *Notifier) Ready() { n.send(daemon.SdNotifyReady) }

// Stopping sends STOPPING=1.
func (n *Notifier) Stopping() { n.send(daemon.SdNotifyStopping) }

// Watchdog sends WATCHDOG=1 every half of WATCHDOG_USEC until ctx ends; it
// returns at once when no watchdog is configured (sd_watchdog_enabled(3)).
func (n *Notifier) Watchdog(ctx context.Context) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n.send(daemon.SdNotifyWatchdog)
		}
	}
}
