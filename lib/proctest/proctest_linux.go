package proctest

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Subreaper makes the calling process a child subreaper.
func Subreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// Leftovers ends every live child of the calling process and, round by
// round, the orphans that reparent to it as their parents die (up to 20
// rounds), reaping each, and returns what it found. Zombies alone (exited,
// not yet waited for) are reaped and not reported. It lists children with
// ps(1) (procps), which the test machines have.
//
// A process gets LeftoverGrace to end on its own first: an idle holder
// ends once the supervisord that started it has, which on a loaded machine
// can come a moment after the test that stopped supervisord returned.
func Leftovers() []Proc {
	for end := time.Now().Add(LeftoverGrace); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		reap()
		if len(children(os.Getpid())) == 0 {
			break
		}
	}
	var found []Proc
	for round := 0; round < 20; round++ {
		reap()
		kids := children(os.Getpid())
		if len(kids) == 0 {
			break
		}
		for _, p := range kids {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		found = append(found, kids...)
		time.Sleep(50 * time.Millisecond)
	}
	reap()
	return found
}

// LeftoverGrace is how long Leftovers lets the calling process's children
// end on their own before it ends them and reports them.
const LeftoverGrace = 5 * time.Second

// reap waits for every child that has exited.
func reap() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// children returns the live (not zombie) children of pid.
func children(pid int) []Proc {
	out, err := exec.Command("ps", "-o", "pid=,stat=,args=", "--ppid", strconv.Itoa(pid)).Output()
	if err != nil && len(out) == 0 {
		return nil // ps exits 1 when there is no child
	}
	var kids []Proc
	for _, line := range bytes.Split(out, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) < 3 || strings.HasPrefix(f[1], "Z") {
			continue
		}
		n, err := strconv.Atoi(f[0])
		if err != nil || f[2] == "ps" {
			continue
		}
		kids = append(kids, Proc{PID: n, Args: strings.Join(f[2:], " ")})
	}
	return kids
}
