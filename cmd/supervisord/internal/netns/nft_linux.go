//go:build linux

package netns

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// The nftables table transparent egress installs in an instance's
// namespace (family inet: IPv4 and IPv6 alike). Its chain "redirect"
// (nat, output, priority -100) sends every TCP connection to an address
// that is not loopback to the bridge's relay on TransparentPort, and
// every UDP datagram to port 53 of such an address to the bridge's
// resolver; its chain "drop" (filter, output, priority 0) drops every
// other UDP datagram to such an address and counts it in the counter
// "udp_dropped". Loopback stays the namespace's own: the agent's
// servers, the proxy listener and the resolver.
const (
	nftTable      = "hostkit"
	nftUDPCounter = "udp_dropped"
)

// nftUnavailable wraps why the rules could not be installed as
// network.nftables_unavailable: never an isolated agent without them.
func nftUnavailable(err error) error {
	return wire.Wrap(api.CodeNetworkNftUnavailable, "transparent egress needs nftables (NF_TABLES, NFT_NAT, NFT_REDIR) in the kernel, loaded or built in; the agent was not started", err)
}

// family is what a rule needs of one address family.
type family struct {
	nfproto byte
	daddr   uint32 // offset of the destination address in the network header
	loop    netip.Prefix
}

var families = []family{
	{unix.NFPROTO_IPV4, 16, netip.MustParsePrefix("127.0.0.0/8")},
	{unix.NFPROTO_IPV6, 24, netip.MustParsePrefix("::1/128")},
}

// notLoopback is the match "the destination address is outside f.loop",
// after "the packet is f's family and carries l4".
func notLoopback(f family, l4 byte) []expr.Any {
	addr := f.loop.Addr().AsSlice()
	mask := make([]byte, len(addr))
	for i := range f.loop.Bits() {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{f.nfproto}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{l4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.daddr, Len: uint32(len(addr))},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: uint32(len(addr)), Mask: mask, Xor: make([]byte, len(addr))},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: addr},
	}
}

// redirectTo appends "redirect to :port".
func redirectTo(e []expr.Any, port uint16) []expr.Any {
	return append(e, &expr.Immediate{Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
		&expr.Redir{RegisterProtoMin: 1})
}

// installRules installs the table in the namespace nsfd names (and
// replaces one already there).
func installRules(nsfd int, relayPort, dnsPort uint16) error {
	c, err := nftables.New(nftables.WithNetNSFd(nsfd))
	if err != nil {
		return nftUnavailable(fmt.Errorf("netns.installRules: %w", err))
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: nftTable})
	c.FlushTable(t)
	c.AddObj(&nftables.CounterObj{Table: t, Name: nftUDPCounter})
	nat := c.AddChain(&nftables.Chain{Name: "redirect", Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	filter := c.AddChain(&nftables.Chain{Name: "drop", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	for _, f := range families {
		c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: redirectTo(notLoopback(f, unix.IPPROTO_TCP), relayPort)})
		dns := append(notLoopback(f, unix.IPPROTO_UDP),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, 53)})
		c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: redirectTo(dns, dnsPort)})
		c.AddRule(&nftables.Rule{Table: t, Chain: filter, Exprs: append(notLoopback(f, unix.IPPROTO_UDP),
			&expr.Objref{Type: 1 /* NFT_OBJECT_COUNTER */, Name: nftUDPCounter},
			&expr.Verdict{Kind: expr.VerdictDrop})})
	}
	if err := c.Flush(); err != nil {
		return nftUnavailable(fmt.Errorf("netns.installRules: %w", err))
	}
	return nil
}

// udpDropped reads the counter of dropped UDP datagrams.
func udpDropped(nsfd int) (uint64, error) {
	c, err := nftables.New(nftables.WithNetNSFd(nsfd))
	if err != nil {
		return 0, err
	}
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: nftTable}
	o, err := c.GetObject(&nftables.CounterObj{Table: t, Name: nftUDPCounter})
	if err != nil {
		return 0, fmt.Errorf("netns.udpDropped: %w", err)
	}
	co, ok := o.(*nftables.CounterObj)
	if !ok {
		return 0, fmt.Errorf("netns.udpDropped: %T", o)
	}
	return co.Packets, nil
}

// defaultRoutes adds "default dev lo" for IPv4 and IPv6 in the namespace
// nsfd names, so that a connect to a literal address is routed (and then
// redirected) instead of failing with ENETUNREACH. IPv6 is skipped when
// the namespace has it disabled.
func defaultRoutes(nsfd int) error {
	conn, err := rtnetlink.Dial(&netlink.Config{NetNS: nsfd})
	if err != nil {
		return fmt.Errorf("netns.defaultRoutes: %w", err)
	}
	defer conn.Close()
	index := uint32(1) // lo is the first link of every namespace, and here the only one
	for fam, src := range map[uint8]net.IP{unix.AF_INET: net.IPv4(127, 0, 0, 1).To4(), unix.AF_INET6: net.IPv6loopback} {
		// The preferred source is loopback's: lo's addresses have host
		// scope, so without it a datagram would leave from 0.0.0.0 and
		// its answer could not come back.
		err := conn.Route.Add(&rtnetlink.RouteMessage{Family: fam, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
			Scope: unix.RT_SCOPE_LINK, Type: unix.RTN_UNICAST, Attributes: rtnetlink.RouteAttributes{OutIface: index, Src: src}})
		if err != nil && fam == unix.AF_INET {
			return fmt.Errorf("netns.defaultRoutes: %w", err)
		}
	}
	return nil
}
