//go:build !linux

package holder

import (
	"context"
	"log/slog"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

func run(ctx context.Context, cfg Config, log *slog.Logger) error {
	return wire.Errorf(api.CodeRuntimeNotImplemented, "the host runtime's holder needs Linux")
}

// ExitCode maps an exit status to a shell-style code (128+signal); on this
// system a signal maps to 128.
func ExitCode(e *api.ExitStatus) int64 {
	if e == nil {
		return 0
	}
	if e.Signal != "" {
		return 128
	}
	return e.Code
}
