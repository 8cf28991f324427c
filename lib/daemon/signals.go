package daemon

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// SignalContext returns a context cancelled by SIGINT or SIGTERM, and
// ignores SIGPIPE so a peer that hangs up mid-write cannot kill the daemon
// (writes then fail with EPIPE instead). stop releases the signal handlers.
func SignalContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	signal.Ignore(syscall.SIGPIPE)
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}
