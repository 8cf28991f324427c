//go:build linux || darwin

package sock

import (
	"net"
	"strings"

	"github.com/coreos/go-systemd/v22/activation"
	"hostkit.dev/lib/wire"
)

// Activated returns the Unix stream listeners that the service manager passed
// to this process by socket activation (sd_listen_fds(3): LISTEN_PID must be
// this process, LISTEN_FDS counts descriptors from fd 3, LISTEN_FDNAMES names
// them). It unsets those variables, so it works once per process.
//
// With no names it returns every passed listener in fd order. With names it
// returns, in the order of names, every listener whose FileDescriptorName=
// matches; listeners not asked for are closed. When no sockets were passed it
// returns nil, nil: the caller falls back to Listen. Wrap each result with
// FromListener to get peer credentials.
//
// Errors: sock.activation_invalid when a passed descriptor is not a listening
// Unix stream socket, or a requested name was not passed.
func Activated(names ...string) ([]*net.UnixListener, error) {
	if len(names) == 0 {
		ls, err := activation.Listeners()
		if err != nil {
			return nil, wire.Wrap(CodeActivationInvalid, "cannot read passed sockets", err)
		}
		if len(ls) == 0 {
			return nil, nil
		}
		return unixListeners(ls, "")
	}
	byName, err := activation.ListenersWithNames()
	if err != nil {
		return nil, wire.Wrap(CodeActivationInvalid, "cannot read passed sockets", err)
	}
	if len(byName) == 0 {
		return nil, nil
	}
	var out []net.Listener
	var missing []string
	for _, n := range names {
		ls := byName[n]
		if len(ls) == 0 {
			missing = append(missing, n)
		}
		out = append(out, ls...)
		delete(byName, n)
	}
	for _, ls := range byName {
		closeAll(ls)
	}
	if len(missing) > 0 {
		closeAll(out)
		return nil, wire.Errorf(CodeActivationInvalid, "the service manager passed no socket named %s", strings.Join(missing, ", "))
	}
	return unixListeners(out, strings.Join(names, ", "))
}

// unixListeners converts ls, all of which must be Unix stream listeners; on
// error it closes all of them.
func unixListeners(ls []net.Listener, what string) ([]*net.UnixListener, error) {
	out := make([]*net.UnixListener, 0, len(ls))
	for _, l := range ls {
		ul, ok := l.(*net.UnixListener)
		if !ok || ul.Addr().Network() != "unix" {
			closeAll(ls)
			if what == "" {
				what = "socket"
			}
			return nil, wire.Errorf(CodeActivationInvalid, "a passed %s is not a listening Unix stream socket", what)
		}
		ul.SetUnlinkOnClose(false)
		out = append(out, ul)
	}
	return out, nil
}

// closeAll closes every non-nil listener in ls.
func closeAll(ls []net.Listener) {
	for _, l := range ls {
		if l != nil {
			l.Close()
		}
	}
}
