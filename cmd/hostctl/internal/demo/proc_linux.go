package demo

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts a daemon in its own session; unless keep, the kernel
// kills it when hostctl dies.
func sysProcAttr(keep bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	if !keep {
		a.Pdeathsig = syscall.SIGKILL
	}
	return a
}

// canScanProcs reports whether processesWith can look at every process.
const canScanProcs = true

// process is one process found by processesWith.
type process struct {
	pid int
}

// processesWith returns the processes (other than this one) whose command
// line or environment contains any of needles. Processes whose environment
// cannot be read (another user's, as a normal user) are judged by their
// command line.
func processesWith(needles ...string) []process {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		dir := "/proc/" + e.Name() + "/"
		cmdline, _ := os.ReadFile(dir + "cmdline")
		environ, _ := os.ReadFile(dir + "environ")
		for _, n := range needles {
			if bytes.Contains(cmdline, []byte(n)) || bytes.Contains(environ, []byte(n)) {
				out = append(out, process{pid: pid})
				break
			}
		}
	}
	return out
}

// supported reports whether the demo can run on this system.
func supported() error { return nil }
