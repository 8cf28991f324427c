// Package transport sends requests upstream for egressd (pipeline steps
// 2 and 7). Route picks the one address a request may be dialled to —
// from the operator's static host map, a literal IP, or DNS, refusing
// non-public addresses and egressd's own — and RoundTrip sends over a
// connection dialled to exactly that address: the dialer re-checks the
// real address in ControlContext, and connections are pooled per (origin,
// checked address), so a connection made for one address never serves
// another. Every request goes through one net/http Transport per pool
// (HTTP/1.1, or HTTP/2 when the upstream chooses it), so that streamed
// answers, 1xx, 101 (Switching Protocols), trailers and large bodies all
// work. TLS is verified (system roots plus an optional CA file);
// redirects are never followed; proxies from the environment are never
// used; each phase has its own timeout (Config).
package transport

import (
	"context"
	"net/netip"
	"strconv"
	"strings"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// Resolver looks names up (*net.Resolver satisfies it).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// HostMap is the operator's static host map: canonical "host:port" → the
// address to dial. Entries may name any address class.
type HostMap map[string]netip.Addr

// ParseResolve parses one -resolve entry "HOST:PORT:ADDR" (as curl's
// --resolve; an IPv6 HOST or ADDR in brackets) and adds it to m.
func (m HostMap) ParseResolve(s string) error {
	bad := wire.Errorf(wire.CodeRequestInvalid, "-resolve wants HOST:PORT:ADDR, got %q", s)
	var hostPort, addr string
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]:")
		if end < 0 {
			return bad
		}
		rest := s[end+2:]
		c := strings.IndexByte(rest, ':')
		if c < 0 {
			return bad
		}
		hostPort, addr = s[:end+2+c], rest[c+1:]
	} else {
		parts := strings.SplitN(s, ":", 3)
		if len(parts) != 3 {
			return bad
		}
		hostPort, addr = parts[0]+":"+parts[1], parts[2]
	}
	host, port, err := netguard.SplitHostPort(hostPort)
	if err != nil || port == 0 {
		return bad
	}
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"))
	if err != nil || a.Zone() != "" {
		return bad
	}
	m[netguard.JoinHostPort(host, port)] = a
	return nil
}

// Route is where one request goes.
type Route struct {
	Addr   netip.AddrPort // the checked address; the only one dialled
	Class  netguard.Class // its class
	Mapped bool           // from the static host map
}

// Route returns the address for canonical host and port (effective, not
// 0). Rules, in order: a static host map entry wins (any class); a literal
// loopback host (netguard.IsLiteralLoopback) is its own address ("localhost"
// is 127.0.0.1, no lookup); another IP literal must be public; a name is
// resolved and its first public address used, and a name with no public
// address is refused. egressd's own listeners are always refused. Errors:
// egress.address_forbidden, egress.upstream_error (lookup failed).
func (t *Transport) Route(ctx context.Context, host string, port uint16) (Route, error) {
	r, err := t.route(ctx, host, port)
	if err != nil {
		return Route{}, err
	}
	for _, f := range t.cfg.Forbidden {
		if f.Port() == r.Addr.Port() && (f.Addr() == r.Addr.Addr() || f.Addr().IsUnspecified()) {
			return Route{}, wire.Errorf(egressdapi.CodeAddressForbidden, "the destination is egressd itself")
		}
	}
	return r, nil
}

func (t *Transport) route(ctx context.Context, host string, port uint16) (Route, error) {
	if len(t.cfg.HostMap) > 0 {
		var buf [128]byte // the key as netguard.JoinHostPort spells it, without allocating
		if a, ok := t.cfg.HostMap[string(appendHostPort(buf[:0], host, port))]; ok {
			return Route{Addr: netip.AddrPortFrom(a, port), Class: netguard.Classify(a), Mapped: true}, nil
		}
	}
	if host == "localhost" {
		a := netip.AddrFrom4([4]byte{127, 0, 0, 1})
		return Route{Addr: netip.AddrPortFrom(a, port), Class: netguard.ClassLoopback}, nil
	}
	if a, ok := netguard.HostAddr(host); ok {
		c := netguard.Classify(a)
		if !netguard.IsLiteralLoopbackAddr(a) && !c.Public() {
			return Route{}, wire.Errorf(egressdapi.CodeAddressForbidden, "address class %s is not allowed", c)
		}
		return Route{Addr: netip.AddrPortFrom(a, port), Class: c}, nil
	}
	addrs, err := t.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		if ctx.Err() != nil {
			return Route{}, wire.Wrap(egressdapi.CodeTimeout, "name lookup timed out", err)
		}
		return Route{}, wire.Wrap(egressdapi.CodeUpstreamError, "name lookup failed", err)
	}
	worst := netguard.ClassInvalid
	for _, a := range addrs {
		a = a.Unmap().WithZone("") // a resolver's IPv4 answer may come mapped
		c := netguard.Classify(a)
		if c.Public() {
			return Route{Addr: netip.AddrPortFrom(a, port), Class: c}, nil
		}
		worst = max(worst, c)
	}
	return Route{}, wire.Errorf(egressdapi.CodeAddressForbidden, "the name resolves to no public address (class %s)", worst)
}

// appendHostPort appends netguard.JoinHostPort(host, port) to b.
func appendHostPort(b []byte, host string, port uint16) []byte {
	if strings.IndexByte(host, ':') >= 0 && !strings.HasPrefix(host, "[") {
		b = append(append(append(b, '['), host...), ']')
	} else {
		b = append(b, host...)
	}
	if port == 0 {
		return b
	}
	return strconv.AppendUint(append(b, ':'), uint64(port), 10)
}
