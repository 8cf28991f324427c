package daemon

import (
	"io"
	"log/slog"

	"hostkit.dev/lib/redact"
)

// Log field names shared by every daemon (STYLE.md: field names are
// constants).
const (
	KeyDaemon  = "daemon"
	KeyOp      = "op"
	KeyCode    = "code"
	KeyCorr    = "corr"
	KeyPeerUID = "peer_uid"
	KeyPeerPID = "peer_pid"
	KeyEpoch   = "epoch"
	KeySocket  = "socket"
	KeyErr     = "err"
	KeyReload  = "reload" // daemon.sighup: ReloadNone, ReloadDone or ReloadFailed
)

// NewLogger returns a JSON slog logger writing to w through the redacting
// handler with scrubber s (nil: pattern redaction only), tagged with the
// daemon's name.
func NewLogger(w io.Writer, level slog.Level, s *redact.Scrubber, daemon string) *slog.Logger {
	if s == nil {
		s = redact.NewScrubber()
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	return slog.New(redact.NewHandler(h, s)).With(slog.String(KeyDaemon, daemon))
}
