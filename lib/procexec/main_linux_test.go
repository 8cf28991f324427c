package procexec

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/procstat"
)

func TestMain(m *testing.M) {
	// PID 1 here may not reap orphans: adopt our descendants ourselves, so
	// the runner reaps the group members it kills.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	code := m.Run()
	for { // reap anything left, then insist that nothing was
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

// groupMembers lists every process (zombies included) in process group
// pgid.
func groupMembers(pgid int) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.PGRP == pgid {
			out = append(out, e.Name()+":"+string(st.State))
		}
	}
	return out
}

// assertGroupGone fails unless no process of group pgid remains.
func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	if pgid <= 0 {
		t.Fatalf("no process group id")
	}
	if m := groupMembers(pgid); len(m) > 0 {
		t.Fatalf("process group %d still has members %v", pgid, m)
	}
}
