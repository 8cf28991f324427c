//go:build linux || darwin

package sock

import (
	"net"

	"hostkit.dev/lib/wire"
)

// OverflowUID is the uid the kernel reports for a peer whose uid has no
// mapping in our user namespace (Linux's default overflowuid; macOS's
// "nobody"). Such a peer's identity is unknown.
const OverflowUID = 65534

// Peer is the identity of the process on the other end of a Unix socket, as
// the kernel reported it when that process connected.
type Peer struct {
	UID uint32 // effective uid
	GID uint32 // effective (Linux) or primary (macOS) gid
	PID int32  // process id, always > 0
}

// Conn is an accepted connection with its peer's kernel credentials.
type Conn struct {
	*net.UnixConn
	Peer Peer // read once, at accept (or dial), never again for this connection
}

// PeerOf reads the credentials of c's peer from the kernel: SO_PEERCRED on
// Linux (unix(7)), LOCAL_PEERCRED for uid/gid and LOCAL_PEERPID for the pid on
// macOS. allowOverflow accepts uid OverflowUID (65534).
//
// Errors: sock.peer_unknown when the credentials cannot be read, the pid is
// <= 0 (a peer in another pid namespace), or the uid is 65534 and
// allowOverflow is false.
func PeerOf(c *net.UnixConn, allowOverflow bool) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, wire.Wrap(CodePeerUnknown, "cannot read peer credentials", err)
	}
	var p Peer
	var perr error
	if err := raw.Control(func(fd uintptr) { p, perr = peerCred(int(fd)) }); err != nil {
		return Peer{}, wire.Wrap(CodePeerUnknown, "cannot read peer credentials", err)
	}
	if perr != nil {
		return Peer{}, wire.Wrap(CodePeerUnknown, "cannot read peer credentials", perr)
	}
	return p, checkPeer(p, allowOverflow)
}

// checkPeer rejects credentials that do not identify a process and user.
func checkPeer(p Peer, allowOverflow bool) error {
	if p.PID <= 0 {
		return wire.Errorf(CodePeerUnknown, "peer pid %d is not visible (another pid namespace?)", p.PID)
	}
	if p.UID == OverflowUID && !allowOverflow {
		return wire.Errorf(CodePeerUnknown, "peer uid is the overflow uid %d (unmapped user namespace?)", OverflowUID)
	}
	return nil
}
