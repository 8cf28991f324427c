package sock

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// xucredVersion is XUCRED_VERSION from <sys/ucred.h>.
const xucredVersion = 0

// peerCred reads LOCAL_PEERCRED (struct xucred: effective uid and groups,
// the first being the primary gid) and LOCAL_PEERPID, both at SOL_LOCAL, as
// recorded when the peer connected.
func peerCred(fd int) (Peer, error) {
	x, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return Peer{}, err
	}
	if x.Version != xucredVersion || x.Ngroups < 1 {
		return Peer{}, fmt.Errorf("unexpected xucred version %d with %d groups", x.Version, x.Ngroups)
	}
	pid, err := unix.GetsockoptInt(fd, unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	if err != nil {
		return Peer{}, err
	}
	return Peer{UID: x.Uid, GID: x.Groups[0], PID: int32(pid)}, nil
}
