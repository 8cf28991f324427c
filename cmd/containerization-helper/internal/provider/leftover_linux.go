package provider

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// cgroupDrainWait bounds RemoveLeftover's wait for the processes it
// killed in a leftover cgroup to leave it.
const cgroupDrainWait = 2 * time.Second

// RemoveLeftover removes what a runtime killed during `create` (or a
// helper killed while its create ran) leaves behind for id: a state
// directory under the provider's root holding no container the runtime
// can read (runc 1.1 writes state.json last, so the directory may hold
// only exec.fifo), and the container's cgroup at cgroupsPath (the
// bundle's linux.cgroupsPath) in every cgroup hierarchy, which no
// runtime verb removes once the state is gone.
//
// It does nothing, and reports false, while the runtime can read id (the
// container exists: its own delete is the way to remove it). Otherwise
// the state directory is removed with the runtime's own `delete --force
// <id>` (runc's delete removes a directory without state.json itself),
// and by path when that fails or leaves it; every process still in the
// cgroup (an orphaned runtime init) gets SIGKILL, and the cgroup
// directories are removed. The caller must own id and cgroupsPath (the
// provider checks only their shape): only ids and cgroups the helper
// generated, never a foreign container's. Errors: CodeInvalidID,
// CodeInvalidArgument (cgroupsPath not absolute and clean, or "/"),
// CodeFailed (a directory that cannot be removed).
func (p *cli) RemoveLeftover(ctx context.Context, id, cgroupsPath string) (bool, error) {
	if err := checkID(id); err != nil {
		return false, err
	}
	if !cleanAbs(cgroupsPath) || cgroupsPath == "/" {
		return false, wire.Errorf(CodeInvalidArgument, "a cgroups path must be absolute, clean and not /")
	}
	c, err := p.negotiated(ctx)
	if err != nil {
		return false, err
	}
	if name := c.Features().StoredState; name != "" {
		// The runtime keeps a record the codec decodes: a record that
		// decodes is a container (its init alive or not), never a
		// leftover, whatever `state` says.
		if _, ok := p.readStored(c, filepath.Join(p.root, id, name)); ok {
			return false, nil
		}
	}
	st, err := p.State(ctx, id)
	switch {
	case err == nil && st != nil:
		return false, nil // a container the runtime reads: not a leftover
	case err != nil && !wire.HasCode(err, CodeNotFound) && !wire.HasCode(err, CodeFailed) && !wire.HasCode(err, CodeDecode):
		return false, err // e.g. cancelled: decide nothing
	}
	removed := false
	dir := filepath.Join(p.root, id)
	if ok, err := p.exists(id); err != nil {
		return false, err
	} else if ok {
		_, _, rerr := p.run(ctx, verbDelete, nil, []string{"--force", id})
		if ok, _ := p.exists(id); ok || rerr != nil {
			if err := os.RemoveAll(dir); err != nil {
				return false, wire.Wrap(CodeFailed, p.name+": cannot remove the leftover state of "+id, err)
			}
		}
		p.forgetStored(id)
		removed = true
	}
	cg, err := p.removeCgroup(cgroupsPath)
	return removed || cg, err
}

// removeCgroup removes cgroupsPath from every cgroup hierarchy this host
// mounts, after SIGKILL to every process still in it; it reports whether
// it removed any directory. A hierarchy without the path is skipped.
// Errors: CodeFailed.
func (p *cli) removeCgroup(cgroupsPath string) (bool, error) {
	removed := false
	for _, m := range p.mounts {
		dir := filepath.Join(m.Point, cgroupsPath)
		if !within(dir, m.Point) || dir == m.Point {
			continue
		}
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := drainCgroup(dir); err != nil {
			return removed, wire.Wrap(CodeFailed, p.name+": cannot empty a leftover cgroup", err)
		}
		if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
			return removed, wire.Wrap(CodeFailed, p.name+": cannot remove a leftover cgroup", err)
		}
		removed = true
	}
	return removed, nil
}

// drainCgroup sends SIGKILL to every process in the cgroup dir (one level:
// the runtimes make no child cgroups) until it is empty, for at most
// cgroupDrainWait.
func drainCgroup(dir string) error {
	deadline := time.Now().Add(cgroupDrainWait)
	var killed []int
	defer func() {
		for _, pid := range killed {
			reapChild(pid) // gone from the cgroup: exited
		}
	}()
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		pids := strings.Fields(string(b))
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("processes are still in the cgroup")
		}
		for _, s := range pids {
			if pid, err := strconv.Atoi(s); err == nil && pid > 1 {
				_ = unix.Kill(pid, syscall.SIGKILL)
				killed = append(killed, pid)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reapChild reaps pid if it is an exited child of this process (the
// helper is a child subreaper, so an orphaned init may be its child);
// anything else is left alone.
func reapChild(pid int) {
	var ws unix.WaitStatus
	_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
}
