package sock

import "golang.org/x/sys/unix"

// becomeSubreaper makes this process adopt orphaned descendants
// (PR_SET_CHILD_SUBREAPER, prctl(2)), so killed children are always reaped.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
