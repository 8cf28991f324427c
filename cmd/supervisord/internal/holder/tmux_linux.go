//go:build linux

package holder

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/procstat"

	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/tmux"
)

// The tmux backend (docs/supervisord.md, "Session backends, isolated network,
// restart"). The holder starts one tmux server per run on the instance's
// socket (<run>/supervisord/h/<16 hex>.tmux, in the holder's root-only
// directory). The server daemonizes; the holder is a child subreaper, so it
// is reparented to the holder and stays in the tree that stop freezes and
// kills. The server runs as root like the holder (its socket lives in the
// holder directory, which only root can enter; the agent can never reach it);
// the pane runs `supervisord agent-exec`, which makes the pane's terminal the
// agent's, drops to the agent uid and execs the agent. The pane's output is
// piped to a FIFO the holder drains into the ring and the log, as with the
// native backend. The pane stays after its process exits (remain-on-exit) so
// the holder reads its exit status from tmux, then ends the server.

// FileTmuxFIFO is the FIFO in the instance directory that carries the
// pane's output to the holder.
const FileTmuxFIFO = "tmux.fifo"

// tmuxWait bounds waiting for tmux to report a pane's exit status.
const tmuxWait = 5 * time.Second

// startTmux starts the server and the agent's session and returns the
// reading end of the output FIFO. Called by startRun (on the namespace's
// thread when isolated, so the server and the agent inherit it), before
// the run's reaper starts, so exec.Cmd can wait for the tmux client.
func (h *holder) startTmux() (*os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	sock := h.spec.TmuxSocket
	fifo := filepath.Join(h.cfg.Dir, FileTmuxFIFO)
	os.Remove(fifo)
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		return nil, fmt.Errorf("holder.startTmux: mkfifo: %w", err)
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	// The holder's own writer keeps EOF away until the run's tree is gone.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		r.Close()
		return nil, err
	}
	cleanup := func() {
		w.Close()
		os.Remove(fifo)
		os.Remove(sock)
	}
	h.mu.Lock()
	stopping := h.stopping
	h.mu.Unlock()
	if stopping {
		r.Close()
		cleanup()
		return nil, errStopping
	}
	os.Remove(sock) // a stale socket of an earlier run
	rows, cols := h.spec.Rows, h.spec.Cols
	if rows == 0 || cols == 0 {
		rows, cols = api.DefaultRows, api.DefaultCols
	}
	cmd := exec.Command(h.spec.Tmux, tmux.StartArgs(sock, rows, cols, fifo, []string{exe, "agent-exec", "-dir", h.cfg.Dir})...)
	// The server's own environment; the agent's comes from agent.env.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/"}
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		r.Close()
		cleanup()
		return nil, fmt.Errorf("tmux: %v: %s", err, strings.TrimSpace(string(out)))
	}
	p, err := h.queryPane()
	if err != nil {
		h.killTmux(0)
		r.Close()
		cleanup()
		return nil, err
	}
	h.mu.Lock()
	h.leader, h.pgid, h.tmuxServer, h.afterTree = p.PID, p.PID, p.ServerPID, cleanup
	leaderDone := h.leaderDone
	h.mu.Unlock()
	go h.watchPane(p.PID, leaderDone)
	return r, nil
}

// queryPane asks tmux for the pane's state. The holder's reaper may reap
// the tmux client before os/exec does (ECHILD): its output still counts.
func (h *holder) queryPane() (tmux.Pane, error) {
	cmd := exec.Command(h.spec.Tmux, tmux.QueryArgs(h.spec.TmuxSocket)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	p, perr := tmux.ParsePane(string(out), func(n int) string { return unix.SignalName(unix.Signal(n)) })
	if perr != nil {
		return p, errors.Join(perr, err)
	}
	return p, nil
}

// watchPane waits (pidfd) for the pane's process to end, records its exit
// status as the run's (from tmux, which reaps it; or the reaper's, when
// the server died first and the pane was reparented to the holder; else
// unknown), and ends the server so the run's tree can empty.
func (h *holder) watchPane(pid int, leaderDone chan struct{}) {
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		unix.Close(fd)
	}
	h.mu.Lock()
	server := h.tmuxServer
	h.mu.Unlock()
	var exit *api.ExitStatus
	for end := time.Now().Add(tmuxWait); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		p, err := h.queryPane()
		if err == nil && p.Dead && p.PID == pid && p.Exit != nil {
			exit = p.Exit
			break
		}
		// tmux has not reaped it (we saw a tmux server leave its pane's
		// process a zombie for good): read the zombie's exit status.
		if e := zombieExit(pid); e != nil {
			exit = e
			break
		}
		if err != nil && !slices.Contains(proc.Descendants(os.Getpid()), server) {
			break // the server is gone
		}
	}
	if exit == nil { // give the reaper its chance
		for end := time.Now().Add(time.Second); time.Now().Before(end) && !isClosed(leaderDone); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	h.mu.Lock()
	if h.leader == pid && h.exit == nil && !isClosed(leaderDone) {
		if exit == nil {
			exit = &api.ExitStatus{Unknown: true}
		}
		h.exit = exit
		close(leaderDone)
	}
	h.mu.Unlock()
	h.killTmux(server)
}

// killTmux ends the run's tmux server: kill-server, then SIGTERM to its
// pid when it is still our descendant.
func (h *holder) killTmux(server int) {
	cmd := exec.Command(h.spec.Tmux, tmux.KillArgs(h.spec.TmuxSocket)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	_ = cmd.Run()
	if server <= 1 {
		return
	}
	for _, p := range proc.Descendants(os.Getpid()) {
		if p == server {
			_ = proc.Kill(server, unix.SIGTERM)
		}
	}
}

// zombieExit returns the exit status of pid when it is a zombie, from
// /proc/<pid>/stat field 52 (exit_code, in waitpid(2) form; proc(5),
// Linux 3.5+), else nil.
func zombieExit(pid int) *api.ExitStatus {
	s, err := procstat.Read(pid)
	if err != nil || s.State != 'Z' || s.ExitCode < 0 {
		return nil
	}
	return exitStatus(unix.WaitStatus(s.ExitCode))
}
