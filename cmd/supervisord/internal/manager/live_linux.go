//go:build linux

package manager

import (
	"errors"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// alive reports whether instance id's holder runs: it holds flock on
// <sock>.lock for its whole life, so a free lock means it is gone — a
// test no recycled pid can fool.
func (h procHolders) alive(id string) bool {
	f, err := os.OpenFile(h.sock(id)+".lock", os.O_RDWR, 0)
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
func (h procHolders) killOrphan(md *store.Metadata) bool {
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

// holderTook reports whether a holder took md's instance: its record or
// exit record exists, or the holder named in the provision intent is
// still starting, in which case it is waited for (up to spawnTimeout)
// until it writes holder.json or ends. One still starting after that is
// killed (verified by identity): it never got as far as the agent's
// record, so nothing of the instance is left running under it.
func (m *Manager) holderTook(md *store.Metadata) bool {
	took := func() bool {
		return exists(m.st.Path(md.ID, store.FileHolder)) || exists(m.st.Path(md.ID, store.FileExit))
	}
	if took() {
		return true
	}
	if md.Intent == nil || md.Intent.Holder == nil {
		return m.h.alive(md.ID) // never assigned (the identity is saved before the assignment)
	}
	h := *md.Intent.Holder
	end, killed := time.Now().Add(spawnTimeout), false
	for m.h.running(h) && time.Now().Before(end.Add(5*time.Second)) {
		if took() {
			return true
		}
		if !killed && time.Now().After(end) {
			m.cfg.Logger.Warn("instance.holder_stuck", slog.String("instance", md.ID), slog.Int("holder_pid", h.PID))
			m.h.kill(h)
			killed = true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return took()
}

func (h procHolders) running(id proc.Identity) bool { return proc.Alive(id) }

func (h procHolders) kill(id proc.Identity) { _ = proc.SignalVerified(id, unix.SIGKILL) }
