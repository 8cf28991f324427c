package state

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data (and only the metadata needed to read it).
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// preallocate gives f n bytes of allocated blocks (fallocate(2)), so
// writes inside them change no size; a file system without fallocate
// gets a plain size.
func preallocate(f *os.File, n int64) error {
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err == nil {
		return nil
	}
	return f.Truncate(n)
}
