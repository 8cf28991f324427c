//go:build linux || darwin

package sock

import (
	"context"
	"errors"
	"net"
	"syscall"

	"hostkit.dev/lib/wire"
)

// Dial connects to the Unix stream socket at path (an absolute path of at
// most MaxPathLen bytes); ctx bounds the connect.
//
// Errors: sock.config_invalid or sock.path_too_long for a bad path;
// daemon.unavailable (wire.CodeUnavailable) when nothing serves the path —
// with Retry "safe" when it is missing, refuses or is busy (no request was
// sent), "never" when permission is denied — or ctx ended first.
func Dial(ctx context.Context, path string) (*net.UnixConn, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		e := wire.Wrap(wire.CodeUnavailable, "cannot connect to "+path, err)
		switch {
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			e.Msg = "permission denied connecting to " + path
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
			e.Msg = "no daemon is listening at " + path
			e.Retry = wire.RetrySafe
		default:
			e.Retry = wire.RetrySafe
		}
		return nil, e
	}
	return c.(*net.UnixConn), nil
}
