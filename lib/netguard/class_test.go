package netguard

import (
	"net/netip"
	"testing"

	"github.com/matryer/is"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, addr string
		want       Class
	}{
		{"public v4", "8.8.8.8", ClassPublic},
		{"public v4 edge", "11.0.0.0", ClassPublic},
		{"public v6", "2606:4700::1111", ClassPublic},
		{"loopback v4", "127.0.0.1", ClassLoopback},
		{"loopback v4 high", "127.255.255.255", ClassLoopback},
		{"loopback v6", "::1", ClassLoopback},
		{"private 10", "10.1.2.3", ClassPrivate},
		{"private 172.16", "172.16.0.1", ClassPrivate},
		{"private 172.31", "172.31.255.255", ClassPrivate},
		{"public 172.32", "172.32.0.1", ClassPublic},
		{"private 192.168", "192.168.1.1", ClassPrivate},
		{"private ula fc", "fc00::1", ClassPrivate},
		{"private ula fd", "fd12:3456::1", ClassPrivate},
		{"link local v4", "169.254.1.1", ClassLinkLocal},
		{"link local v6", "fe80::1", ClassLinkLocal},
		{"link local v6 zoned", "fe80::1%eth0", ClassLinkLocal},
		{"cgnat", "100.64.0.1", ClassCGNAT},
		{"cgnat high", "100.127.255.255", ClassCGNAT},
		{"public after cgnat", "100.128.0.1", ClassPublic},
		{"metadata aws", "169.254.169.254", ClassMetadata},
		{"metadata ecs", "169.254.170.2", ClassMetadata},
		{"metadata alibaba", "100.100.100.200", ClassMetadata},
		{"metadata aws v6", "fd00:ec2::254", ClassMetadata},
		{"unspecified v4", "0.0.0.0", ClassUnspecified},
		{"this network", "0.1.2.3", ClassUnspecified},
		{"unspecified v6", "::", ClassUnspecified},
		{"multicast v4", "224.0.0.1", ClassMulticast},
		{"multicast v4 high", "239.255.255.255", ClassMulticast},
		{"multicast v6", "ff02::1", ClassMulticast},
		{"broadcast", "255.255.255.255", ClassBroadcast},
		{"reserved 240", "240.0.0.1", ClassReserved},
		{"documentation v4", "192.0.2.1", ClassReserved},
		{"documentation v4 2", "198.51.100.1", ClassReserved},
		{"documentation v4 3", "203.0.113.1", ClassReserved},
		{"benchmarking", "198.18.0.1", ClassReserved},
		{"ietf protocol", "192.0.0.8", ClassReserved},
		{"6to4 relay anycast", "192.88.99.1", ClassReserved},
		{"documentation v6", "2001:db8::1", ClassReserved},
		{"documentation v6 new", "3fff::1", ClassReserved},
		{"discard only", "100::1", ClassReserved},
		{"ietf v6", "2001:2::1", ClassReserved},
		{"site local", "fec0::1", ClassReserved},
		{"unallocated v6", "4000::1", ClassReserved},
		{"srv6", "5f00::1", ClassReserved},
		{"mapped public", "::ffff:8.8.8.8", ClassIPv4Mapped},
		{"mapped loopback", "::ffff:127.0.0.1", ClassLoopback},
		{"mapped private", "::ffff:10.0.0.1", ClassPrivate},
		{"mapped metadata", "::ffff:169.254.169.254", ClassMetadata},
		{"compat loopback", "::127.0.0.1", ClassLoopback},
		{"compat public", "::8.8.8.8", ClassReserved},
		{"nat64 public", "64:ff9b::808:808", ClassNAT64},
		{"nat64 loopback", "64:ff9b::7f00:1", ClassLoopback},
		{"nat64 metadata", "64:ff9b::a9fe:a9fe", ClassMetadata},
		{"nat64 private", "64:ff9b::10.0.0.1", ClassPrivate},
		{"nat64 local public", "64:ff9b:1::808:808", ClassNAT64},
		{"nat64 local /96 loopback", "64:ff9b:1::127.0.0.1", ClassLoopback},
		{"nat64 local other layout unread", "64:ff9b:1:a00:1:100:808:808", ClassNAT64},
		{"6to4 public", "2002:808:808::1", ClassSixToFour},
		{"6to4 loopback", "2002:7f00:1::1", ClassLoopback},
		{"6to4 private", "2002:c0a8:101::1", ClassPrivate},
		{"teredo public", "2001:0:808:808:0:0:f7f7:f7f7", ClassTeredo},
		{"teredo client loopback", "2001:0:808:808::80ff:fffe", ClassLoopback},
		{"teredo server private", "2001:0:a00:1::f7f7:f7f7", ClassPrivate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			c := Classify(netip.MustParseAddr(tt.addr))
			is.Equal(c.String(), tt.want.String())
			is.Equal(c.Public(), tt.want == ClassPublic)
		})
	}
}

func TestClassInvalidAndNames(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.Equal(Classify(netip.Addr{}), ClassInvalid)
	is.True(!ClassInvalid.Public())
	is.True(!Class(0).Public()) // the zero Class is never public
	is.Equal(Class(-1).String(), "invalid")
	is.Equal(Class(999).String(), "invalid")
	seen := map[string]bool{}
	for c := ClassInvalid; c <= ClassMetadata; c++ {
		is.True(c.String() != "")
		is.True(!seen[c.String()]) // class names are unique
		seen[c.String()] = true
		is.Equal(c.Public(), c == ClassPublic)
	}
}
