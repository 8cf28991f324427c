package provider

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/cmd/containerization-helper/internal/codec"
	"hostkit.dev/lib/procstat"
)

// storedState reads id's state from the runtime's own record
// (Features().StoredState, decoded strictly by the codec) and derives its
// status as runc 1.1's `state` does (libcontainer/container_linux.go,
// refreshState and runType):
//
//   - paused when the container's freezer cgroup is frozen;
//   - stopped when the init (init_process_pid) is gone, is a zombie, or
//     is another process (its start time differs from
//     init_process_start): the pid is then 0;
//   - created while the exec fifo (exec.fifo) is in the state directory;
//   - running otherwise.
//
// Bundle and annotations come from the record's labels. It reports false,
// and the caller runs `state`, whenever this is not certain: no record or
// an unreadable one (a container being created or deleted), a record the
// codec refuses, another id, no bundle label, or a freezer state other
// than thawed or frozen. It runs nothing.
func (p *cli) storedState(c codec.Codec, id string) (State, bool) {
	name := c.Features().StoredState
	if name == "" {
		return State{}, false
	}
	dir := filepath.Join(p.root, id)
	s, ok := p.readStored(c, filepath.Join(dir, name))
	if !ok || s.ID != id || s.Bundle == "" {
		return State{}, false
	}
	st := State{ID: id, Pid: s.InitPid, Bundle: s.Bundle, Created: s.Created, Annotations: s.Annotations}
	paused, known := p.frozen(s.CgroupPaths)
	if !known {
		return State{}, false
	}
	switch {
	case paused:
		st.Status = StatusPaused
	case !initAlive(s.InitPid, s.InitStart):
		st.Status, st.Pid = StatusStopped, 0
	default:
		_, err := os.Lstat(filepath.Join(dir, "exec.fifo"))
		switch {
		case err == nil:
			st.Status = StatusCreated
		case errors.Is(err, fs.ErrNotExist):
			st.Status = StatusRunning
		default:
			return State{}, false
		}
	}
	return st, true
}

// maxStoredCache bounds the decoded-record cache (entries).
const maxStoredCache = 4096

// readStored returns the record at path, decoded strictly; a file whose
// identity is unchanged since it was last decoded is not read again
// (observe of 100 containers reads 100 records each time). Annotations
// are shared with the cache: callers never modify them.
func (p *cli) readStored(c codec.Codec, path string) (codec.Stored, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return codec.Stored{}, false
	}
	key := storedFile{dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size,
		mtime: unix.TimespecToNsec(st.Mtim), ctime: unix.TimespecToNsec(st.Ctim)}
	p.mu.Lock()
	hit, ok := p.stored[path]
	p.mu.Unlock()
	if ok && hit.dev == key.dev && hit.ino == key.ino && hit.size == key.size && hit.mtime == key.mtime && hit.ctime == key.ctime {
		return hit.stored, true
	}
	b, err := readRegular(path, codec.MaxState)
	if err != nil {
		return codec.Stored{}, false
	}
	s, err := c.StoredState(b)
	if err != nil {
		return codec.Stored{}, false
	}
	// Another file may have replaced the one stat'ed above while it was
	// read: then the next call decodes again (key no longer matches).
	key.stored = s
	p.mu.Lock()
	if len(p.stored) >= maxStoredCache {
		clear(p.stored)
	}
	p.stored[path] = key
	p.mu.Unlock()
	return s, true
}

// initAlive reports whether pid is still the init that started at start
// (clock ticks since boot) and has not exited.
func initAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	ps, err := procstat.Read(pid)
	return err == nil && ps.StartTime == start && !ps.Exited()
}

// frozen reads the container's freezer state as runc 1.1's cgroup
// managers do: on a cgroup v2 host cgroup.freeze of the unified cgroup
// ("0" thawed, "1" frozen), elsewhere freezer.state of the v1 freezer
// cgroup ("THAWED", "FROZEN"); a missing file or hierarchy is not frozen.
// known is false for anything else (a transition such as "FREEZING", a
// path outside /sys/fs/cgroup, a read error), so the caller asks the
// runtime.
func (p *cli) frozen(paths map[string]string) (paused, known bool) {
	key, file, thawed, frozen := "freezer", "freezer.state", "THAWED\n", "FROZEN\n"
	if p.kind == HostCgroupV2 {
		key, file, thawed, frozen = "", "cgroup.freeze", "0\n", "1\n"
	}
	dir, ok := paths[key]
	if !ok || dir == "" {
		return false, true
	}
	if !cleanAbs(dir) || !within(dir, cgroupRoot) {
		return false, false
	}
	b, err := readSmall(filepath.Join(dir, file))
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENODEV):
		return false, true
	case err != nil:
		return false, false
	case string(b) == thawed:
		return false, true
	case string(b) == frozen:
		return true, true
	}
	return false, false
}

// storedList lists the root from the runtime's own records (storedState
// for each directory, as `list` reads each one), sorted by id, running
// nothing. It reports false, and the caller runs `list`, when the codec
// has no stored state or any entry is not certain: a name that is not a
// valid id, an entry storedState does not cover (e.g. a container being
// created, whose record is not written yet), a root that cannot be read.
func (p *cli) storedList(c codec.Codec) ([]State, bool) {
	if c.Features().StoredState == "" {
		return nil, false
	}
	ents, err := os.ReadDir(p.root)
	if err != nil {
		return nil, false
	}
	out := make([]State, 0, len(ents))
	for _, e := range ents {
		if !e.IsDir() {
			continue // runc's list skips anything but directories too
		}
		if !ValidID(e.Name()) {
			return nil, false
		}
		st, ok := p.storedState(c, e.Name())
		if !ok {
			return nil, false
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b State) int { return strings.Compare(a.ID, b.ID) })
	return out, true
}

// waitExit waits up to budget (or until ctx ends) for the process pid to
// exit, and reports whether it did (a zombie has exited). It identifies the
// process by a pidfd (pidfd_open(2)), taken before the start time is read
// so a recycled pid cannot pass, and polls it; without pidfd support it
// polls /proc/<pid>/stat.
func waitExit(ctx context.Context, pid int, budget time.Duration) bool {
	if pid <= 0 {
		return true
	}
	ps, err := procstat.Read(pid)
	if err != nil || ps.Exited() {
		return true
	}
	deadline := time.Now().Add(budget)
	fd, err := unix.PidfdOpen(pid, 0)
	if err == nil {
		defer unix.Close(fd)
		if again, err := procstat.Read(pid); err != nil || again.StartTime != ps.StartTime {
			return true // the process we saw is gone; pid names another
		}
		for ctx.Err() == nil {
			left := time.Until(deadline)
			if left <= 0 {
				return false
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, int(min(left, 100*time.Millisecond).Milliseconds())+1)
			if err != nil && !errors.Is(err, unix.EINTR) {
				break
			}
			if n > 0 {
				return true
			}
		}
	}
	for ctx.Err() == nil && time.Now().Before(deadline) {
		cur, err := procstat.Read(pid)
		if err != nil || cur.StartTime != ps.StartTime || cur.Exited() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}
