package provider

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/procstat"
)

// verbose routes provider and procexec logs to stderr (-hk.verbose).
var verbose = flag.Bool("hk.verbose", false, "log provider and procexec lines to stderr")

func TestMain(m *testing.M) {
	flag.Parse()
	// The helper is a child subreaper; so are the tests: container inits
	// are reparented here when the runtime exits, and Delete reaps them.
	// (PID 1 on this host does not reap orphans.)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	code := m.Run()
	removeRootfs()
	for { // every init must have been reaped by Delete: report any left
		pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
		fmt.Fprintln(os.Stderr, "reaped a leftover descendant", pid)
		code = max(code, 1)
	}
	if kids := children(); len(kids) > 0 {
		fmt.Fprintln(os.Stderr, "live children after the tests:", kids)
		code = max(code, 1)
	}
	if err := goleak.Find(); err != nil {
		fmt.Fprintln(os.Stderr, "goleak:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// children lists the processes whose parent is this process.
func children() []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.PPID == os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}
