package daemon

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DisableCoreDumps sets RLIMIT_CORE to 0 and PR_SET_DUMPABLE to 0, so a
// crash writes no core file and no other process of the same user can
// ptrace the daemon or read its memory through /proc (prctl(2),
// setrlimit(2)). Daemons that hold secrets call it before reading any.
func DisableCoreDumps() error {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
		return fmt.Errorf("daemon.DisableCoreDumps: setrlimit: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("daemon.DisableCoreDumps: prctl: %w", err)
	}
	return nil
}
