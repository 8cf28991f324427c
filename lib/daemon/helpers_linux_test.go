package daemon

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes this process adopt orphaned descendants
// (PR_SET_CHILD_SUBREAPER, prctl(2)), so killed children are always reaped.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// childHarden reports PR_GET_DUMPABLE and RLIMIT_CORE before and after
// DisableCoreDumps, as "before dumpable=D core=C/M" and "after ..." lines.
// It first raises RLIMIT_CORE (best effort) so the "after" values show a
// change.
func childHarden() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_CORE, &lim); err == nil && lim.Cur == 0 {
		_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{Cur: 1 << 20, Max: max(lim.Max, 1<<20)})
	}
	if err := report("before"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := DisableCoreDumps(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := report("after"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func report(label string) error {
	d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("prctl: %w", err)
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &lim); err != nil {
		return fmt.Errorf("getrlimit: %w", err)
	}
	fmt.Printf("%s dumpable=%d core=%d/%d\n", label, d, lim.Cur, lim.Max)
	return nil
}
