// Package loopowner decides whether a loopback listener may receive a
// credential: the socket listening on the destination address must not be
// owned by an agent UID (docs/design.md, "Nothing escapes policy";
// docs/egressd.md, "The pipeline", step 5). On Linux it asks the kernel for
// the TCP listeners on the port with a sock_diag(7) netlink dump
// (inet_diag_msg.idiag_uid is each socket's owner), falling back to
// /proc/net/tcp and /proc/net/tcp6 (the uid column) only when the kernel has
// no sock_diag for TCP. On other platforms the check is unavailable and every
// loopback credential is refused.
package loopowner

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// Default agent UID range (docs/design.md, "Agents and isolation": the
// range systemd uses for dynamic users).
const (
	DefaultAgentMin = 61184
	DefaultAgentMax = 65519
)

// Checker checks loopback listeners. The zero value asks the kernel
// (falling back to /proc) with the default agent range.
type Checker struct {
	ProcRoot string // the fallback's /proc; default "/proc"
	AgentMin uint32 // first agent UID; 0 with AgentMax 0 = the default range
	AgentMax uint32 // last agent UID
}

func (c Checker) agent(uid uint32) bool {
	lo, hi := c.AgentMin, c.AgentMax
	if lo == 0 && hi == 0 {
		lo, hi = DefaultAgentMin, DefaultAgentMax
	}
	return uid >= lo && uid <= hi
}

// Listener is one LISTEN socket (from sock_diag or /proc/net/tcp{,6}).
type Listener struct {
	Addr netip.AddrPort // the local address and port it listens on
	UID  uint32         // the socket's owner uid
}

// decide applies the rule to the listeners that could accept a connection
// to addr: every one must be owned by a non-agent UID, and there must be at
// least one. It returns the owners' UIDs. Errors:
// egress.loopback_owner_agent, egress.loopback_owner_unverified.
func (c Checker) decide(addr netip.AddrPort, ls []Listener) ([]uint32, error) {
	var owners []uint32
	for _, l := range ls {
		if l.Addr.Port() != addr.Port() || !accepts(l.Addr.Addr(), addr.Addr()) {
			continue
		}
		if c.agent(l.UID) {
			return nil, wire.Errorf(egressdapi.CodeLoopbackOwnerAgent, "the loopback listener on port %d belongs to an agent UID", addr.Port())
		}
		owners = append(owners, l.UID)
	}
	if len(owners) == 0 {
		return nil, wire.Errorf(egressdapi.CodeLoopbackOwnerUnknown, "no listener found on loopback port %d", addr.Port())
	}
	return owners, nil
}

// accepts reports whether a socket bound to local may accept a connection
// to dst: the same address, an unspecified address of either family (a
// dual-stack [::] listener takes IPv4 too), or the IPv4-mapped form.
func accepts(local, dst netip.Addr) bool {
	if local == dst || local.IsUnspecified() {
		return true
	}
	return local.Is4In6() && dst.Is4() && local.Unmap() == dst
}

// parse reads a /proc/net/tcp or tcp6 table and returns its LISTEN sockets.
func parse(r io.Reader) ([]Listener, error) {
	var out []Listener
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 8 || f[3] != "0A" {
			continue
		}
		ap, ok := parseAddr(f[1])
		if !ok {
			continue
		}
		uid, err := strconv.ParseUint(f[7], 10, 32)
		if err != nil {
			continue
		}
		out = append(out, Listener{Addr: ap, UID: uint32(uid)})
	}
	return out, sc.Err()
}

// parseAddr decodes "0100007F:1F90": the address as 32-bit words in host
// byte order, the port in big-endian hex.
func parseAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a, uint16(port)), true
}
