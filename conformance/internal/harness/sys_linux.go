package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/moby/sys/mountinfo"
)

// groupAttr puts a test in its own process group, killed with the harness.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// suiteCgroups are the cgroups runtime-tools v0.9.0 makes
// (cgroups.AbsCgroupPath "/cgrouptest" from each hierarchy's root,
// cgroups.RelCgroupPath "testdir/cgrouptest/container" below the caller's
// own cgroup), deepest first. The runtime removes the leaf; the parents
// of the relative path stay behind.
var suiteCgroups = []string{"testdir/cgrouptest/container", "testdir/cgrouptest", "testdir"}

// removeSuiteCgroups rmdirs the suite's cgroups in every hierarchy. rmdir
// removes only an empty cgroup with no process, so it cannot disturb
// anything else; a cgroup it cannot remove (a process left in it) is a
// problem.
func removeSuiteCgroups() []string {
	ms, err := hostMounts()
	if err != nil {
		return []string{err.Error()}
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, m := range CgroupMounts(ms) {
		var dirs []string
		for _, base := range []string{"/", ownCgroup(own, m)} {
			for _, rel := range suiteCgroups {
				dirs = append(dirs, filepath.Join(m.Point, base, rel))
			}
		}
		dirs = append(dirs, filepath.Join(m.Point, "cgrouptest"))
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				problems = append(problems, fmt.Sprintf("cgroup %s left behind: %v", d, err))
			}
		}
	}
	return problems
}

// ownCgroup returns this process's cgroup path in mount m, from
// /proc/self/cgroup ("id:controllers:path"; cgroups(7)); "/" if unknown.
func ownCgroup(procCgroup []byte, m Mount) string {
	for _, line := range strings.Split(string(procCgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if m.FSType == "cgroup2" && parts[1] == "" {
			return parts[2]
		}
		if m.FSType != "cgroup" || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			for _, o := range m.Super {
				if c == o {
					return parts[2]
				}
			}
		}
	}
	return "/"
}

// unmountUnder detaches every mount left at or under dir, innermost
// first, and returns how many it detached and those it could not. A
// container that inherits the caller's mount namespace (linux_ns_itype)
// mounts its /proc, /dev, ... in the host's, and they outlive it.
func unmountUnder(dir string) (int, []string) {
	ms, err := hostMounts()
	if err != nil {
		return 0, []string{err.Error()}
	}
	n := 0
	var problems []string
	for i := len(ms) - 1; i >= 0; i-- {
		if p := ms[i].Point; p == dir || strings.HasPrefix(p, dir+"/") {
			if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				problems = append(problems, fmt.Sprintf("mount %s left in the host namespace: %v", p, err))
				continue
			}
			n++
		}
	}
	return n, problems
}

// hostMounts reads this process's mount table.
func hostMounts() ([]Mount, error) {
	ms, err := mountinfo.GetMounts(nil)
	if err != nil {
		return nil, err
	}
	return mountsOf(ms), nil
}
