package sock

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// becomeSubreaper makes this process adopt orphaned descendants
// (PR_SET_CHILD_SUBREAPER, prctl(2)), so killed children are always reaped.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// denyChown installs, on every thread of this process, a seccomp filter
// that fails fchownat(2) and fchown(2) with EPERM whatever their
// arguments, as systemd's SystemCallFilter=~@privileged with
// SystemCallErrorNumber=EPERM does (seccomp(2)). Go's os.Chown, os.Lchown
// and (*os.File).Chown make only these two calls. The filter reads the
// system-call number alone (no architecture check): it is for a test
// child, which makes only native calls.
func denyChown() error {
	deny := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 2, K: unix.SYS_FCHOWNAT},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, K: unix.SYS_FCHOWN},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
		{Code: unix.BPF_RET | unix.BPF_K, K: deny},
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return errno
	}
	return nil
}
