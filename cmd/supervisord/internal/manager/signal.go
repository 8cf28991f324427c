package manager

import (
	"context"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// ParseSignal parses a signal number (1..64) or name. A name is one of
// this system's signal names as golang.org/x/sys/unix lists them
// (signal(7): HUP, INT, TERM, KILL, USR1, WINCH, ...), with or without the
// SIG prefix, in any case: TERM, SIGTERM and sigterm are 15 on Linux.
// Errors: signal.invalid.
func ParseSignal(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 && n <= 64 {
		return n, nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if n := unix.SignalNum(name); n > 0 {
		return int64(n), nil
	}
	return 0, wire.Errorf(api.CodeSignalInvalid, "unknown signal")
}

// Signal sends a signal to instance id's process group.
func (m *Manager) Signal(ctx context.Context, id, sig string) error {
	n, err := ParseSignal(sig)
	if err != nil {
		return err
	}
	md, err := m.load(id)
	if err != nil {
		return err
	}
	if isContainer(md) {
		return errNoSignal() // container.go
	}
	if terminal(md.State) || !m.h.alive(md.ID) {
		return wire.Errorf(api.CodeInstanceNotRunning, "instance %s is not running", md.ID)
	}
	return m.h.signal(ctx, md.ID, n)
}
