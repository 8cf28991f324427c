package server

import "golang.org/x/sys/unix"

// BecomeSubreaper marks this process a child subreaper (prctl(2)
// PR_SET_CHILD_SUBREAPER): runc create exits once the container's init
// is set up, and the init (a session leader, out of lib/procexec's
// reach) is reparented to the helper, where the provider reaps it at
// delete; the grandchildren lib/procexec kills are reaped the same way.
func BecomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }
