//go:build linux

package manager

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// holderAlive reports whether instance id's holder runs: it holds flock on
// <sock>.lock for its whole life, so a free lock means it is gone — a
// test no recycled pid can fool.
func (m *Manager) holderAlive(id string) bool {
	f, err := os.OpenFile(m.sockPath(id)+".lock", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true
	}
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
	}
	return false
}

// killOrphan ends an agent that outlived its holder, only after verifying
// through a pidfd that the recorded pid is still that process (start time
// and boot id): it is stopped first (so its pid, the group id, cannot be
// recycled meanwhile), its process group is killed, then the leader. It
// reports whether it signalled anything.
func killOrphan(md *store.Metadata) bool {
	a := md.Agent
	if a.PID <= 1 || a.StartTime == 0 {
		return false
	}
	if err := proc.SignalVerified(a, unix.SIGSTOP); err != nil {
		return false
	}
	if proc.Alive(a) && md.PGID == a.PID {
		_ = proc.Kill(-md.PGID, unix.SIGKILL)
	}
	_ = proc.SignalVerified(a, unix.SIGKILL)
	_ = proc.SignalVerified(a, unix.SIGCONT)
	return true
}
