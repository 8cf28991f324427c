package procstat

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxLine bounds a stat line. A real one is about 300 bytes: 52 numbers
// and a command name of at most 64 bytes (a workqueue worker's).
const maxLine = 2048

// Read reads and parses /proc/<pid>/stat. It opens, reads and closes the
// file with plain system calls into a buffer on the stack, so a walk over
// every process of the host costs two small allocations per process.
// Errors: the open or read error as the kernel gave it (unix.ENOENT or
// unix.ESRCH when the process is gone; on systems without /proc,
// unix.ENOENT), wrapped; ErrMalformed.
func Read(pid int) (Stat, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	fd, err := retry(func() (int, error) { return unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return Stat{}, fmt.Errorf("procstat.Read: %w", err)
	}
	defer unix.Close(fd)
	var buf [maxLine]byte
	n := 0
	for n < len(buf) {
		m, err := retry(func() (int, error) { return unix.Read(fd, buf[n:]) })
		if err != nil {
			return Stat{}, fmt.Errorf("procstat.Read: %w", err)
		}
		if m == 0 {
			return Parse(buf[:n])
		}
		n += m
	}
	return Stat{}, fmt.Errorf("%w: over %d bytes", ErrMalformed, maxLine)
}

// retry calls f again while it fails with EINTR.
func retry(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}
