package loopowner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// sock_diag(7) wire layout (linux/inet_diag.h), all fields in host byte
// order except the ports and addresses of the socket id, which are in
// network byte order.
const (
	tcpListen = 10 // TCP_LISTEN in include/net/tcp_states.h

	sizeofNlmsghdr   = 16 // len u32, type u16, flags u16, seq u32, pid u32
	sizeofSockID     = 48 // sport be16, dport be16, src [16]byte, dst [16]byte, if u32, cookie [2]u32
	sizeofReqV2      = 8 + sizeofSockID
	sizeofDiagMsg    = 4 + sizeofSockID + 20 // family, state, timer, retrans; id; expires, rqueue, wqueue, uid, inode
	offsetMsgUID     = 4 + sizeofSockID + 12
	recvBufferBytes  = 32 << 10
	maxReplyMessages = 1 << 16 // a dump of one port's listeners is a handful; stop a runaway
)

// errNetlinkUnavailable means the kernel offers no sock_diag for TCP
// (no NETLINK_SOCK_DIAG, or no tcp_diag): only then does Check fall back
// to /proc/net/tcp{,6}.
var errNetlinkUnavailable = errors.New("loopowner: sock_diag is unavailable")

// seq numbers requests so that a stale reply is never taken for a fresh one.
var seq atomic.Uint32

// netlinkListeners asks the kernel (sock_diag(7), NETLINK_SOCK_DIAG,
// SOCK_DIAG_BY_FAMILY with inet_diag_req_v2) for the TCP sockets in
// state LISTEN with local port port, in both address families. The
// kernel walks only its listening hash and matches idiag_sport there, so
// the cost does not grow with the connection table (TIME_WAIT entries
// included); the replies are filtered on state and port again here. It
// returns errNetlinkUnavailable (wrapped) when sock_diag is missing, any
// other error otherwise.
func netlinkListeners(port uint16) ([]Listener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.EAFNOSUPPORT) {
			return nil, fmt.Errorf("%w: socket: %v", errNetlinkUnavailable, err)
		}
		return nil, fmt.Errorf("loopowner: netlink socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("loopowner: netlink bind: %w", err)
	}
	buf := make([]byte, recvBufferBytes)
	var out []Listener
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		ls, err := dump(fd, buf, family, port)
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

// dump sends one request for family and reads the multi-part answer up to
// NLMSG_DONE.
func dump(fd int, buf []byte, family uint8, port uint16) ([]Listener, error) {
	s := seq.Add(1)
	if _, err := unix.Write(fd, request(s, family, port)); err != nil {
		return nil, fmt.Errorf("loopowner: netlink send: %w", err)
	}
	var out []Listener
	for n := 0; n < maxReplyMessages; {
		m, _, flags, from, err := unix.Recvmsg(fd, buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("loopowner: netlink receive: %w", err)
		}
		if flags&unix.MSG_TRUNC != 0 {
			return nil, errors.New("loopowner: netlink reply truncated")
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // only the kernel answers sock_diag
		}
		for b := buf[:m]; len(b) > 0; n++ {
			typ, mseq, data, rest, ok := nextMessage(b)
			if !ok {
				return nil, errors.New("loopowner: malformed netlink reply")
			}
			b = rest
			if mseq != s {
				continue
			}
			switch typ {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				return nil, replyError(data)
			case unix.SOCK_DIAG_BY_FAMILY:
				if l, ok := parseDiagMsg(data, port); ok {
					out = append(out, l)
				}
			}
		}
	}
	return nil, errors.New("loopowner: netlink reply did not end")
}

// nextMessage splits the first netlink message off b: its type, sequence
// number and payload, and what follows it (aligned to 4 bytes).
func nextMessage(b []byte) (typ uint16, seq uint32, data, rest []byte, ok bool) {
	if len(b) < sizeofNlmsghdr {
		return 0, 0, nil, nil, false
	}
	ne := binary.NativeEndian
	l := int(ne.Uint32(b[0:]))
	if l < sizeofNlmsghdr || l > len(b) {
		return 0, 0, nil, nil, false
	}
	next := min((l+3)&^3, len(b))
	return ne.Uint16(b[4:]), ne.Uint32(b[8:]), b[sizeofNlmsghdr:l], b[next:], true
}

// request builds nlmsghdr + inet_diag_req_v2 for a dump of family's TCP
// listeners on port.
func request(s uint32, family uint8, port uint16) []byte {
	b := make([]byte, sizeofNlmsghdr+sizeofReqV2)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(b[8:], s)
	r := b[sizeofNlmsghdr:]
	r[0] = family
	r[1] = unix.IPPROTO_TCP
	r[2] = 0 // idiag_ext: no extensions
	ne.PutUint32(r[4:], 1<<tcpListen)
	binary.BigEndian.PutUint16(r[8:], port) // id.idiag_sport
	return b
}

// replyError decodes an NLMSG_ERROR payload (a negative errno first).
// ENOENT (no handler for the family/protocol: tcp_diag not loaded and not
// loadable) counts as unavailable.
func replyError(data []byte) error {
	if len(data) < 4 {
		return errors.New("loopowner: short netlink error")
	}
	errno := unix.Errno(-int32(binary.NativeEndian.Uint32(data)))
	if errno == 0 {
		return errors.New("loopowner: netlink acknowledged instead of answering")
	}
	if errno == unix.ENOENT || errno == unix.EOPNOTSUPP {
		return fmt.Errorf("%w: %v", errNetlinkUnavailable, errno)
	}
	return fmt.Errorf("loopowner: sock_diag: %w", errno)
}

// parseDiagMsg decodes one inet_diag_msg and keeps it when it is a
// listener on port.
func parseDiagMsg(d []byte, port uint16) (Listener, bool) {
	if len(d) < sizeofDiagMsg || d[1] != tcpListen {
		return Listener{}, false
	}
	id := d[4 : 4+sizeofSockID]
	sport := binary.BigEndian.Uint16(id[0:])
	if sport != port {
		return Listener{}, false
	}
	var a netip.Addr
	switch d[0] {
	case unix.AF_INET:
		a = netip.AddrFrom4([4]byte(id[4:8]))
	case unix.AF_INET6:
		a = netip.AddrFrom16([16]byte(id[4:20]))
	default:
		return Listener{}, false
	}
	uid := binary.NativeEndian.Uint32(d[offsetMsgUID:])
	return Listener{Addr: netip.AddrPortFrom(a, sport), UID: uid}, true
}
