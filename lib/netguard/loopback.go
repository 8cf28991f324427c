package netguard

import "net/netip"

// IsLiteralLoopback is THE literal-loopback predicate of the invariant in
// docs/design.md, "Nothing escapes policy": it reports whether host, as
// written, names the local machine without any lookup. It is true only for
//
//   - "localhost", compared ASCII case-insensitively ("LOCALHOST" is true,
//     since hosts are case-insensitive and CanonicalHost lowercases it);
//   - an IPv4 literal in 127.0.0.0/8 in strict dotted-quad form;
//   - the IPv6 loopback ::1, bare ("::1") or in brackets ("[::1]"), in any
//     spelling net/netip accepts ("0:0:0:0:0:0:0:1"), without a zone.
//
// Everything else is false, in particular "localhost.", "localhost.localdomain",
// Unicode look-alikes ("localhoſt"), "127.1", "0x7f.1", "2130706433",
// "0177.0.0.1", "127.000.000.001", IPv4-mapped forms ("::ffff:127.0.0.1",
// "[::ffff:7f00:1]"), zoned forms ("::1%lo", "[::1%25lo]"), "[127.0.0.1]",
// "" and every name, even one that resolves to 127.0.0.1: DNS and
// /etc/hosts are never consulted. IsLiteralLoopback(h) equals
// IsLiteralLoopback(CanonicalHost(h)) for every h CanonicalHost accepts.
func IsLiteralLoopback(host string) bool {
	if len(host) == len("localhost") && asciiLower(host) == "localhost" {
		return true
	}
	if n := len(host); n >= 2 && host[0] == '[' && host[n-1] == ']' {
		a, err := netip.ParseAddr(host[1 : n-1])
		return err == nil && a.Is6() && IsLiteralLoopbackAddr(a)
	}
	a, err := netip.ParseAddr(host)
	return err == nil && IsLiteralLoopbackAddr(a)
}

// IsLiteralLoopbackAddr reports whether a is in 127.0.0.0/8 (a 4-byte
// address) or is ::1, without a zone. egressd's dialer calls it on the exact
// address it is about to connect to.
//
// An IPv4-mapped address (::ffff:127.0.0.1) is NOT loopback here, although
// netip.Addr.IsLoopback unmaps and says it is: the invariant admits only the
// two literal shapes, and a dialer that unmapped would connect over IPv6
// sockets with different semantics. Callers must not Unmap before calling.
func IsLiteralLoopbackAddr(a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	if a.Is4() {
		return a.As4()[0] == 127
	}
	return a == netip.IPv6Loopback()
}
