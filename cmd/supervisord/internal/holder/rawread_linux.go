//go:build linux

package holder

import (
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// outputReader returns the drain's read function for f. When f is a
// non-blocking descriptor served by Go's poller (the PTY master made by
// pollable, the output pipe, the tmux FIFO), each read(2) is made as a raw
// system call: Go's scheduler does not mark the thread as in a system
// call, so its monitor does not take the holder's single P away and hand
// it back around each of the thousands of reads bulk output needs (n_tty
// returns at most 4 KiB per read): about 15% less CPU per MB. A read that
// finds nothing returns EAGAIN at once and the goroutine waits in the
// poller as usual. Only the drain reads f, and nothing calls f.Fd (which
// would make it blocking, and a raw read could then hold the P
// indefinitely); a descriptor that is not non-blocking when the drain
// starts is read with f.Read.
func outputReader(f *os.File) func([]byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Read
	}
	nonblocking := false
	if rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		nonblocking = err == nil && fl&unix.O_NONBLOCK != 0
	}) != nil || !nonblocking {
		return f.Read
	}
	return func(p []byte) (int, error) {
		var n int
		var errno syscall.Errno
		err := rc.Read(func(fd uintptr) bool {
			for {
				r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
				if e == syscall.EINTR {
					continue
				}
				n, errno = int(r), e
				return e != syscall.EAGAIN
			}
		})
		switch {
		case err != nil:
			return 0, err
		case errno != 0:
			return 0, errno
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}
