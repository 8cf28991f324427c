//go:build linux

package proc

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/procstat"
)

// BootID returns the kernel's boot id (/proc/sys/kernel/random/boot_id).
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("proc.BootID: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Identify returns pid's identity now.
func Identify(pid int) (Identity, error) {
	s, err := procstat.Read(pid)
	if err != nil {
		return Identity{}, ErrGone
	}
	boot, err := BootID()
	if err != nil {
		return Identity{}, err
	}
	return Identity{PID: pid, StartTime: s.StartTime, BootID: boot}, nil
}

// Alive reports whether id still names a live (not zombie) process: same
// boot, same start time.
func Alive(id Identity) bool {
	if id.PID <= 0 {
		return false
	}
	s, err := procstat.Read(id.PID)
	if err != nil || s.Exited() || s.StartTime != id.StartTime {
		return false
	}
	boot, err := BootID()
	return err == nil && boot == id.BootID
}

// Open returns a pidfd for the process id names after verifying, with the
// pidfd held, that the pid still has id's start time and boot id, so a
// signal sent through the pidfd cannot reach a recycled pid. ErrGone on any
// mismatch.
func Open(id Identity) (int, error) {
	if id.PID <= 0 {
		return -1, ErrGone
	}
	fd, err := retry(func() (int, error) { return unix.PidfdOpen(id.PID, 0) })
	if err != nil {
		return -1, ErrGone
	}
	if !Alive(id) {
		unix.Close(fd)
		return -1, ErrGone
	}
	return fd, nil
}

// SignalVerified sends sig to the process id names, through a pidfd after
// verifying its identity. ErrGone when it is not (or no longer) that
// process; nothing is signalled then.
func SignalVerified(id Identity, sig unix.Signal) error {
	fd, err := Open(id)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = retry(func() (int, error) { return 0, unix.PidfdSendSignal(fd, sig, nil, 0) })
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	return err
}

// Kill sends sig to pid (negative: a process group), retrying EINTR. ESRCH
// is not an error: the target is gone.
func Kill(pid int, sig unix.Signal) error {
	_, err := retry(func() (int, error) { return 0, unix.Kill(pid, sig) })
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// GroupAlive reports whether process group pgid has a member.
func GroupAlive(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	_, err := retry(func() (int, error) { return 0, unix.Kill(-pgid, 0) })
	return err == nil || errors.Is(err, unix.EPERM)
}

func retry(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}
