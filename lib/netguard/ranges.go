package netguard

import "net/netip"

type classRange struct {
	p netip.Prefix
	c Class
}

// Transition prefixes whose embedded IPv4 Classify inspects.
var (
	pfxMapped     = netip.MustParsePrefix("::ffff:0:0/96")
	pfxCompat     = netip.MustParsePrefix("::/96")
	pfxNAT64      = netip.MustParsePrefix("64:ff9b::/96")
	pfxNAT64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	pfx6to4       = netip.MustParsePrefix("2002::/16")
	pfxTeredo     = netip.MustParsePrefix("2001::/32")
)

// ranges4 and ranges6 are read-only tables, most specific first: the first
// prefix that contains an address decides its own class.
var ranges4 = []classRange{
	{netip.MustParsePrefix("169.254.169.254/32"), ClassMetadata},
	{netip.MustParsePrefix("169.254.170.2/32"), ClassMetadata},
	{netip.MustParsePrefix("100.100.100.200/32"), ClassMetadata},
	{netip.MustParsePrefix("255.255.255.255/32"), ClassBroadcast},
	{netip.MustParsePrefix("0.0.0.0/8"), ClassUnspecified},
	{netip.MustParsePrefix("10.0.0.0/8"), ClassPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), ClassCGNAT},
	{netip.MustParsePrefix("127.0.0.0/8"), ClassLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), ClassLinkLocal},
	{netip.MustParsePrefix("172.16.0.0/12"), ClassPrivate},
	{netip.MustParsePrefix("192.0.0.0/24"), ClassReserved},
	{netip.MustParsePrefix("192.0.2.0/24"), ClassReserved},
	{netip.MustParsePrefix("192.88.99.0/24"), ClassReserved},
	{netip.MustParsePrefix("192.168.0.0/16"), ClassPrivate},
	{netip.MustParsePrefix("198.18.0.0/15"), ClassReserved},
	{netip.MustParsePrefix("198.51.100.0/24"), ClassReserved},
	{netip.MustParsePrefix("203.0.113.0/24"), ClassReserved},
	{netip.MustParsePrefix("224.0.0.0/4"), ClassMulticast},
	{netip.MustParsePrefix("240.0.0.0/4"), ClassReserved},
}

var ranges6 = []classRange{
	{netip.MustParsePrefix("::/128"), ClassUnspecified},
	{netip.MustParsePrefix("::1/128"), ClassLoopback},
	{netip.MustParsePrefix("fd00:ec2::254/128"), ClassMetadata},
	{pfxMapped, ClassIPv4Mapped},
	{pfxCompat, ClassReserved},
	{pfxNAT64, ClassNAT64},
	{pfxNAT64Local, ClassNAT64},
	{netip.MustParsePrefix("100::/64"), ClassReserved},
	{pfxTeredo, ClassTeredo},
	{netip.MustParsePrefix("2001::/23"), ClassReserved},
	{netip.MustParsePrefix("2001:db8::/32"), ClassReserved},
	{pfx6to4, ClassSixToFour},
	{netip.MustParsePrefix("3fff::/20"), ClassReserved},
	{netip.MustParsePrefix("5f00::/16"), ClassReserved},
	{netip.MustParsePrefix("2000::/3"), ClassPublic},
	{netip.MustParsePrefix("fc00::/7"), ClassPrivate},
	{netip.MustParsePrefix("fe80::/10"), ClassLinkLocal},
	{netip.MustParsePrefix("fec0::/10"), ClassReserved},
	{netip.MustParsePrefix("ff00::/8"), ClassMulticast},
	{netip.MustParsePrefix("::/0"), ClassReserved},
}
