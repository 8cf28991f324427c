package procexec

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/procstat"
)

// group is a child's process group. Until the leader has exited (and while
// it is an unreaped zombie) its pgid cannot be reused, so SIGKILL to -pgid
// reaches only our processes; after that, only signal 0 and scans are used.
type group struct {
	pgid   int
	mu     sync.Mutex
	exited bool
	cause  string // the first code that killed the group, if any
}

// kill records cause (if it is the first) and kills the whole group, unless
// the leader has already exited (then the group was killed already).
func (g *group) kill(cause string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exited {
		return
	}
	if g.cause == "" {
		g.cause = cause
	}
	_ = unix.Kill(-g.pgid, unix.SIGKILL)
}

// leaderExited kills what is left of the group; the leader must be an
// unreaped zombie.
func (g *group) leaderExited() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.exited = true
	_ = unix.Kill(-g.pgid, unix.SIGKILL)
}

// reason returns the code that killed the group, or "".
func (g *group) reason() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cause
}

// cleanup waits until no live member of the group remains, reaping the
// members that are our children (orphans adopted by a child subreaper). A
// zombie whose parent is another process is that parent's to reap.
func (g *group) cleanup(budget time.Duration) error {
	deadline := time.Now().Add(budget)
	for {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-g.pgid, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		live, ours, err := g.members()
		if err == nil && live == 0 && ours == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%d live members, %d unreaped", live, ours)
			}
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// members counts the group's live members and its zombies whose parent is
// this process.
func (g *group) members() (live, ours int, err error) {
	if unix.Kill(-g.pgid, 0) == unix.ESRCH {
		return 0, 0, nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process
		}
		st, err := procstat.Read(pid)
		if err != nil || st.PGRP != g.pgid {
			continue // gone meanwhile, or another group
		}
		switch {
		case !st.Exited():
			live++
		case st.PPID == self:
			ours++
		}
	}
	return live, ours, nil
}
