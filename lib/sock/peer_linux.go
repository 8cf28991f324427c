package sock

import "golang.org/x/sys/unix"

// peerCred reads SO_PEERCRED (unix(7)): the peer's pid, euid and egid at the
// time it called connect(2).
func peerCred(fd int) (Peer, error) {
	u, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Peer{}, err
	}
	return Peer{UID: u.Uid, GID: u.Gid, PID: u.Pid}, nil
}
