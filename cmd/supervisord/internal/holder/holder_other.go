//go:build !linux

package holder

import (
	"context"
	"errors"
	"log/slog"
	"net"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

var errUnassigned = errors.New("holder: channel closed before an assignment")

func await(ctx context.Context, hdir string) (*net.UnixConn, Config, error) {
	return nil, Config{}, wire.Errorf(api.CodeRuntimeNotImplemented, "the host runtime's holder needs Linux")
}

func run(ctx context.Context, cfg Config, ch *net.UnixConn, log *slog.Logger) error {
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
