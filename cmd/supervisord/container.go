package main

import (
	"log/slog"

	"hostkit.dev/lib/daemon"

	"hostkit.dev/cmd/supervisord/internal/container"
)

// containers is the runtime container of -helper-socket: the layout's
// helper socket when the flag is empty, none (nil) for "none", when
// runtime container fails with runtime.unavailable
// (docs/supervisord.md, "runtime: container").
func containers(l daemon.Layout, socket string, log *slog.Logger) *container.Runtime {
	switch socket {
	case "none":
		return nil
	case "":
		socket = l.Socket(daemon.NameHelper)
	}
	return container.New(socket, log)
}
