package procexec

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// markCloexec sets FD_CLOEXEC on every descriptor above 2, so the child
// inherits only 0, 1 and 2 (close_range(2) with CLOSE_RANGE_CLOEXEC, or
// each entry of /proc/self/fd on kernels before 5.11).
func markCloexec() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // closed meanwhile (the directory's own fd)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
			return err
		}
	}
	return nil
}
