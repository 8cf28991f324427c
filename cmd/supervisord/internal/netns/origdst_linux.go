//go:build linux

package netns

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SO_ORIGINAL_DST (linux/netfilter_ipv4.h) and IP6T_SO_ORIGINAL_DST
// (linux/netfilter_ipv6/ip6_tables.h): the destination a connection had
// before a NAT rule (here the namespace's redirect) rewrote it.
const (
	soOriginalDst     = 80
	ip6tSoOriginalDst = 80
)

// originalDst returns the address c's client dialled before the
// namespace's redirect rule sent it to the relay.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	v6 := false
	if la, ok := c.LocalAddr().(*net.TCPAddr); ok && la.IP.To4() == nil {
		v6 = true
	}
	var out netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		var sa [28]byte // sockaddr_in6; a sockaddr_in (16 bytes) fits
		l := uint32(len(sa))
		level, opt := unix.SOL_IP, soOriginalDst
		if v6 {
			level, opt = unix.SOL_IPV6, ip6tSoOriginalDst
		}
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, uintptr(level), uintptr(opt),
			uintptr(unsafe.Pointer(&sa[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e != 0 {
			serr = fmt.Errorf("netns.originalDst: getsockopt: %w", e)
			return
		}
		port := binary.BigEndian.Uint16(sa[2:4])
		if v6 {
			out = netip.AddrPortFrom(netip.AddrFrom16([16]byte(sa[8:24])).Unmap(), port)
		} else {
			out = netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), port)
		}
	})
	if err == nil {
		err = serr
	}
	return out, err
}
