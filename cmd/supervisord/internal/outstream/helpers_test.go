package outstream

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// socketPair returns the two ends of a Unix stream socketpair; both are
// closed when the test ends.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// readFrames reads frames from r until it ends: the output of the data
// frames, the other frames in order, and the error that ended the
// reading (io.EOF at a frame boundary; frame.truncated inside one).
func readFrames(r io.Reader) (out []byte, others []*wire.StreamFrame, end error) {
	for {
		p, err := wire.ReadFrame(r, 0)
		if err != nil {
			return out, others, err
		}
		f, err := wire.DecodeStreamFrame(p)
		if err != nil {
			return out, others, err
		}
		if f.T == wire.StreamData {
			out = append(out, f.B...)
		} else {
			others = append(others, f)
		}
	}
}

// isEOF reports whether err is a clean end between frames.
func isEOF(err error) bool { return errors.Is(err, io.EOF) }

// queued returns the bytes c's socket holds for its peer (SIOCOUTQ).
func queued(t *testing.T, c net.Conn) int {
	t.Helper()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var qerr error
	if err := raw.Control(func(fd uintptr) { n, qerr = sendQueued(fd) }); err != nil || qerr != nil {
		t.Fatal(err, qerr)
	}
	return n
}
