// Package proc reads and signals processes through /proc on Linux:
// process identity (start time and boot id, so a recycled pid is never
// mistaken for ours), the descendants of a process, and the
// freeze-and-kill of a whole process tree. Every raw call retries EINTR;
// ESRCH means the process is gone.
package proc

import (
	"errors"

	"hostkit.dev/lib/wire"
)

// Identity names one process across pid reuse: its pid, its start time in
// clock ticks since boot (/proc/<pid>/stat field 22) and the boot id.
type Identity struct {
	PID       int    `json:"pid"`        // the process id; 0 = no process
	StartTime uint64 `json:"start_time"` // clock ticks since boot (proc(5), /proc/<pid>/stat field 22)
	BootID    string `json:"boot_id"`    // /proc/sys/kernel/random/boot_id when StartTime was read
}

// ErrNotSupported is returned on systems without /proc process control.
var ErrNotSupported = &wire.Error{Code: "runtime.not_implemented", Msg: "process control needs Linux", Retry: wire.RetryNever}

// ErrGone reports that a process no longer exists, or is no longer the
// process an Identity named.
var ErrGone = errors.New("proc: process is gone or is another process")
