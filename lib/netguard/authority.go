package netguard

import (
	"strconv"
	"strings"

	"hostkit.dev/lib/wire"
)

// SplitHostPort splits an authority "host[:port]" (RFC 3986 §3.2, as in a
// CONNECT request target or a Host header) and returns the host in
// CanonicalHost form (IPv6 in brackets) and the port, 0 when absent.
//
// It is strict: an IPv6 host must be in brackets ("[::1]:443"; a bare
// "::1:443" is authority.invalid), anything after "]" but ":port" is
// authority.invalid, "@" is not allowed (host.invalid), and the port must be
// 1-65535 in plain decimal with no sign, no leading zero and not empty
// (authority.port_invalid). Host errors are CanonicalHost's host.* codes.
func SplitHostPort(authority string) (host string, port uint16, err error) {
	raw, port, err := splitAuthority(authority, CodeAuthorityInvalid, CodeAuthorityPortInvalid)
	if err != nil {
		return "", 0, err
	}
	host, err = CanonicalHost(raw)
	if err != nil {
		return "", 0, err
	}
	return host, port, nil
}

// JoinHostPort is the inverse of SplitHostPort for a canonical host: it
// returns "host:port" (the host keeps its brackets), or host alone when
// port is 0.
func JoinHostPort(host string, port uint16) string {
	if strings.IndexByte(host, ':') >= 0 && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	if port == 0 {
		return host
	}
	return host + ":" + strconv.Itoa(int(port))
}

// splitAuthority splits without canonicalising; the raw host keeps its
// brackets. invalid and portInvalid are the codes for the caller's area.
func splitAuthority(a, invalid, portInvalid string) (host string, port uint16, err error) {
	var rest string
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", 0, wire.Errorf(invalid, "IPv6 literal lacks its closing bracket")
		}
		host, rest = a[:end+1], a[end+1:]
		if rest != "" && rest[0] != ':' {
			return "", 0, wire.Errorf(invalid, `only ":port" may follow an IPv6 literal`)
		}
	} else if c := strings.IndexByte(a, ':'); c >= 0 {
		host, rest = a[:c], a[c:]
		if strings.IndexByte(rest[1:], ':') >= 0 {
			return "", 0, wire.Errorf(invalid, "an IPv6 host must be in brackets")
		}
	} else {
		host = a
	}
	if host == "" {
		return "", 0, wire.Errorf(CodeHostEmpty, "host is empty")
	}
	if rest == "" {
		return host, 0, nil
	}
	port, ok := parsePort(rest[1:])
	if !ok {
		return "", 0, wire.Errorf(portInvalid, "port must be 1-65535 in decimal without leading zeros")
	}
	return host, port, nil
}

// parsePort accepts 1-65535 written as 1-5 decimal digits without a leading
// zero or sign.
func parsePort(s string) (uint16, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	if n > 65535 {
		return 0, false
	}
	return uint16(n), true
}
