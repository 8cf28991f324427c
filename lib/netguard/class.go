package netguard

import (
	"net/netip"
)

// Class is the class of an IP address for egress decisions (RFC 6890
// special-purpose address registries, plus cloud metadata endpoints and
// IPv6 transition prefixes). Only ClassPublic may be dialled without an
// operator host-map entry. The zero Class is ClassInvalid, which is never
// public.
type Class int

// Classes: ClassInvalid, then from least to most restrictive (the numeric
// order is the restrictiveness order); Classify reports the most
// restrictive class that applies.
const (
	// ClassInvalid: the zero netip.Addr.
	ClassInvalid Class = iota
	// ClassPublic: global unicast not in any special-purpose range.
	ClassPublic
	// ClassIPv4Mapped: ::ffff:0:0/96 (RFC 4291 §2.5.5.2) with a public IPv4.
	ClassIPv4Mapped
	// ClassNAT64: 64:ff9b::/96 (RFC 6052) or 64:ff9b:1::/48 (RFC 8215)
	// with a public embedded IPv4.
	ClassNAT64
	// ClassSixToFour: 2002::/16 (RFC 3056) with a public embedded IPv4.
	ClassSixToFour
	// ClassTeredo: 2001::/32 (RFC 4380) with public server and client IPv4.
	ClassTeredo
	// ClassReserved: documentation (192.0.2/24, 198.51.100/24, 203.0.113/24,
	// 2001:db8::/32, 3fff::/20), benchmarking (198.18/15, 2001:2::/48),
	// IETF protocol assignments (192.0.0/24, 2001::/23), 240/4, 6to4 relay
	// anycast (192.88.99/24), discard-only 100::/64, ORCHID, SRv6 SIDs
	// (5f00::/16), site-local fec0::/10, IPv4-compatible ::/96 and every
	// IPv6 address outside 2000::/3 not listed elsewhere.
	ClassReserved
	// ClassMulticast: 224/4, ff00::/8.
	ClassMulticast
	// ClassBroadcast: 255.255.255.255.
	ClassBroadcast
	// ClassCGNAT: 100.64/10 shared address space (RFC 6598).
	ClassCGNAT
	// ClassPrivate: 10/8, 172.16/12, 192.168/16 (RFC 1918), fc00::/7
	// (RFC 4193).
	ClassPrivate
	// ClassLinkLocal: 169.254/16 (RFC 3927), fe80::/10.
	ClassLinkLocal
	// ClassUnspecified: 0.0.0.0/8 ("this network", RFC 791), ::.
	ClassUnspecified
	// ClassLoopback: 127/8, ::1.
	ClassLoopback
	// ClassMetadata: cloud instance metadata endpoints 169.254.169.254,
	// 169.254.170.2 (AWS ECS), 100.100.100.200 (Alibaba), fd00:ec2::254
	// (AWS IPv6).
	ClassMetadata
)

var classNames = [...]string{
	ClassInvalid:     "invalid",
	ClassPublic:      "public",
	ClassIPv4Mapped:  "ipv4_mapped",
	ClassNAT64:       "nat64",
	ClassSixToFour:   "6to4",
	ClassTeredo:      "teredo",
	ClassReserved:    "reserved",
	ClassMulticast:   "multicast",
	ClassBroadcast:   "broadcast",
	ClassCGNAT:       "cgnat",
	ClassPrivate:     "private",
	ClassLinkLocal:   "link_local",
	ClassUnspecified: "unspecified",
	ClassLoopback:    "loopback",
	ClassMetadata:    "metadata",
}

// String returns the class's stable snake_case name ("public",
// "link_local", "6to4", ...) for logs and audit records.
func (c Class) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "invalid"
	}
	return classNames[c]
}

// Public reports whether a dial to this class is allowed without an
// operator host-map entry: true for ClassPublic only. Transition classes
// (NAT64, 6to4, Teredo, IPv4-mapped) are not public even when the embedded
// IPv4 is, because the path they take is not the one the policy checked.
func (c Class) Public() bool { return c == ClassPublic }

// Classify returns the class of a. The zone, if any, is ignored. For an
// address that embeds IPv4 (IPv4-mapped, NAT64 in the RFC 6052 /96 layout,
// 6to4, Teredo server and client, and IPv4-compatible ::/96), the embedded addresses are classified too and the
// most restrictive class is returned: 64:ff9b::7f00:1 is ClassLoopback,
// 64:ff9b::808:808 is ClassNAT64.
func Classify(a netip.Addr) Class {
	if !a.IsValid() {
		return ClassInvalid
	}
	a = a.WithZone("")
	if a.Is4() {
		return classify4(a)
	}
	c := classify6(a)
	for _, e := range embedded4(a) {
		c = max(c, classify4(e))
	}
	return c
}

func classify4(a netip.Addr) Class {
	for _, r := range ranges4 {
		if r.p.Contains(a) {
			return r.c
		}
	}
	return ClassPublic
}

func classify6(a netip.Addr) Class {
	for _, r := range ranges6 {
		if r.p.Contains(a) {
			return r.c
		}
	}
	return ClassPublic
}

// embedded4 returns the IPv4 addresses a carries in a transition prefix.
func embedded4(a netip.Addr) []netip.Addr {
	b := a.As16()
	v4 := func(i ...int) netip.Addr {
		return netip.AddrFrom4([4]byte{b[i[0]], b[i[1]], b[i[2]], b[i[3]]})
	}
	switch {
	case pfxMapped.Contains(a), pfxCompat.Contains(a), pfxNAT64.Contains(a), pfxNAT64Local.Contains(a):
		// For 64:ff9b:1::/48 only the common /96 layout (RFC 6052 §2.2) is
		// read; whatever the layout, the address is never public.
		return []netip.Addr{v4(12, 13, 14, 15)}
	case pfx6to4.Contains(a):
		return []netip.Addr{v4(2, 3, 4, 5)}
	case pfxTeredo.Contains(a):
		client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
		return []netip.Addr{v4(4, 5, 6, 7), client}
	}
	return nil
}
