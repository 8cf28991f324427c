package outstream

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sendBufferSize returns the socket's send buffer (SO_SNDBUF, as the
// kernel reports it), and false when raw is not a Unix stream socket.
func sendBufferSize(raw syscall.RawConn) (int, bool) {
	var n, typ int
	var err, terr error
	if cerr := raw.Control(func(fd uintptr) {
		n, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
		var dom int
		dom, terr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		if terr == nil && dom != unix.AF_UNIX {
			typ = -1
			return
		}
		typ, terr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
	}); cerr != nil || err != nil || terr != nil || typ != unix.SOCK_STREAM {
		return 0, false
	}
	return n, true
}

// sendQueued returns the bytes the socket holds for data its peer has
// not read yet (SIOCOUTQ; for a Unix socket, the allocation, overhead
// included, unix(7)).
func sendQueued(fd uintptr) (int, error) {
	return unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
}
