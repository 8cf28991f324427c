package daemon

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// DisableCoreDumps sets RLIMIT_CORE to 0 (setrlimit(2)). macOS has no
// PR_SET_DUMPABLE; ptrace protection there comes from the hardened runtime.
func DisableCoreDumps() error {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
		return fmt.Errorf("daemon.DisableCoreDumps: setrlimit: %w", err)
	}
	return nil
}
