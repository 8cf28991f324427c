package server

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// pidWaiter is a process to wait for: a pidfd (pidfd_open(2)) refers to
// one process, not to its pid number, so a wait on it cannot be fooled by
// pid reuse.
type pidWaiter struct{ fd int }

// openPidWaiter opens a pidfd for pid. Errors: those of pidfd_open(2)
// (ESRCH: no such process).
func openPidWaiter(pid int) (*pidWaiter, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	return &pidWaiter{fd: fd}, nil
}

// pidWaitSlice bounds one poll(2), so the end of ctx is noticed.
const pidWaitSlice = 50 * time.Millisecond

// wait reports whether the process exited before deadline; it returns
// early with ctx.Err() when ctx ends. A pidfd becomes readable when its
// process exits (pidfd_open(2)), reaped or not.
func (w *pidWaiter) wait(ctx context.Context, deadline time.Time) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		n, err := unix.Poll(fds, int(min(left, pidWaitSlice)/time.Millisecond)+1)
		switch {
		case err == unix.EINTR:
		case err != nil:
			return false, err
		case n > 0:
			return true, nil
		}
	}
}

// signal sends sig to the process (pidfd_send_signal(2)). Errors: those
// of pidfd_send_signal(2) (ESRCH: the process has exited).
func (w *pidWaiter) signal(sig unix.Signal) error {
	return unix.PidfdSendSignal(w.fd, sig, nil, 0)
}

// close releases the pidfd.
func (w *pidWaiter) close() { unix.Close(w.fd) }
