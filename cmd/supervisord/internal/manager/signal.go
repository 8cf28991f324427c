package manager

import (
	"context"
	"strconv"
	"strings"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// signals are the names instance.signal accepts (with or without SIG).
var signals = map[string]int64{
	"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12, "PIPE": 13,
	"ALRM": 14, "TERM": 15, "CONT": 18, "STOP": 19, "TSTP": 20, "WINCH": 28,
}

// ParseSignal parses a signal name (TERM, SIGTERM) or number (1..64).
// Errors: signal.invalid.
func ParseSignal(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 && n <= 64 {
		return n, nil
	}
	if n, ok := signals[strings.TrimPrefix(strings.ToUpper(s), "SIG")]; ok {
		return n, nil
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
