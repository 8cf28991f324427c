//go:build linux

package holder

import (
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"hostkit.dev/cmd/supervisord/internal/proc"
)

// killRounds bounds the freeze-and-kill escalations.
const killRounds = 5

// stop ends the whole tree: SIGTERM and SIGCONT to the process group
// (only while the leader is unreaped, so the group id cannot have been
// recycled) and to every descendant, a wait of up to timeout for the tree
// to end, then freeze-and-kill until the reaper sees no child left. It
// returns once the tree is empty or the rounds are spent.
func (h *holder) stop(timeout time.Duration) {
	h.mu.Lock()
	if !h.stopping {
		close(h.stopCh)
	}
	h.stopping = true
	if h.exit == nil && h.pgid > 1 {
		_ = proc.Kill(-h.pgid, unix.SIGTERM)
		_ = proc.Kill(-h.pgid, unix.SIGCONT)
	}
	// The run's channel, taken after stopping is set: no later run starts.
	treeEmpty, server := h.treeEmpty, h.tmuxServer
	h.mu.Unlock()
	self := os.Getpid()
	for _, p := range proc.Descendants(self) {
		if p == server {
			continue // tmux: the server outlives its pane to report the exit status, then is ended
		}
		_ = proc.Kill(p, unix.SIGTERM)
		_ = proc.Kill(p, unix.SIGCONT)
	}
	select {
	case <-treeEmpty:
		return
	case <-time.After(timeout):
	}
	for i := 0; i < killRounds; i++ {
		n := proc.FreezeKill(self)
		h.mu.Lock()
		h.killed += n
		h.mu.Unlock()
		h.log.Info("holder.freeze_kill", slog.Int("killed", n), slog.Int("round", i))
		select {
		case <-treeEmpty:
			return
		case <-time.After(2 * time.Second):
		}
	}
	h.log.Error("holder.stop_incomplete", slog.Int("remaining", len(proc.Descendants(self))))
}

// signal sends sig to the process group while the leader runs, else to
// every remaining descendant.
func (h *holder) signal(sig unix.Signal) error {
	h.mu.Lock()
	leaderAlive, pgid, treeEmpty := h.exit == nil, h.pgid, h.treeEmpty
	if leaderAlive && pgid > 1 {
		defer h.mu.Unlock()
		return proc.Kill(-pgid, sig)
	}
	h.mu.Unlock()
	if isClosed(treeEmpty) {
		return errExited
	}
	for _, p := range proc.Descendants(os.Getpid()) {
		_ = proc.Kill(p, sig)
	}
	return nil
}
