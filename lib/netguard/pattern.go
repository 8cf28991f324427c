package netguard

import (
	"strings"

	"hostkit.dev/lib/wire"
)

// Pattern is an egress-policy origin pattern (docs/design.md, "Identifiers
// and schemas"): either a canonical origin, matched exactly, a wildcard
// "https://*.example.com[:port]", or a raw TCP origin "tcp://host:port"
// (matched exactly; it allows a transparent connection that is neither TLS
// nor HTTP, docs/egressd.md "Transparent connections"). Patterns are for
// policy only, never a credential destination. The zero Pattern matches
// nothing; build one with ParsePattern.
type Pattern struct {
	// origin is the exact origin, or for a wildcard the origin of the suffix
	// ("https://example.com" for "https://*.example.com").
	origin   Origin
	wildcard bool
}

// ParsePattern parses a canonical origin (see ParseOrigin, with its errors)
// or a wildcard pattern "https://*.suffix[:port]". The wildcard must be the
// whole leftmost label ("https://*example.com", "https://a.*.example.com"
// and "https://*.*.example.com" are pattern.wildcard_invalid), only with
// https (pattern.wildcard_scheme), over a name rather than an IP literal
// (pattern.wildcard_invalid), with at least two labels after "*."
// ("https://*.com" is pattern.too_broad). The suffix follows ParseOrigin's
// rules and errors; no public-suffix list is consulted, so "*.co.uk" is
// accepted.
//
// "tcp://host:port" needs its port (origin.port_invalid without one),
// takes no wildcard (pattern.wildcard_scheme), and otherwise follows
// ParseOrigin's rules and errors for the authority; an explicit port is
// kept as written ("tcp://h:443" stays so).
func ParsePattern(s string) (Pattern, error) {
	i := strings.Index(s, "://")
	if i < 0 {
		return Pattern{}, wire.Errorf(CodeOriginInvalid, `pattern is not "scheme://host[:port]"`)
	}
	if asciiLower(s[:i]) == SchemeTCP && !strings.Contains(s[i+3:], "*") {
		return parseTCP(s[i+3:])
	}
	auth := s[i+3:]
	if j := strings.IndexAny(auth, `/\?#`); j >= 0 {
		auth = auth[:j]
	}
	wild := strings.HasPrefix(auth, "*.")
	if n := strings.Count(auth, "*"); n > 1 || n == 1 && !wild {
		return Pattern{}, wire.Errorf(CodePatternWildcardInvalid, `"*" is allowed only as the whole leftmost label`)
	}
	if !wild {
		o, err := ParseOrigin(s)
		if err != nil {
			return Pattern{}, err
		}
		return Pattern{origin: o}, nil
	}
	if asciiLower(s[:i]) != SchemeHTTPS {
		return Pattern{}, wire.Errorf(CodePatternWildcardScheme, `a wildcard pattern must use "https"`)
	}
	o, err := ParseOrigin(s[:i+3] + s[i+5:])
	if err != nil {
		return Pattern{}, err
	}
	if _, ok := hostAddr(o.Host); ok {
		return Pattern{}, wire.Errorf(CodePatternWildcardInvalid, "a wildcard cannot cover an IP literal")
	}
	if strings.IndexByte(o.Host, '.') < 0 {
		return Pattern{}, wire.Errorf(CodePatternTooBroad, `a wildcard needs at least two labels after "*."`)
	}
	return Pattern{origin: o, wildcard: true}, nil
}

// String returns the pattern's canonical spelling: the canonical origin, or
// "https://*.suffix[:port]" with the default port omitted.
func (p Pattern) String() string {
	if !p.wildcard {
		return p.origin.String()
	}
	o := p.origin
	o.Host = "*." + o.Host
	return o.String()
}

// IsWildcard reports whether p is a "https://*.suffix" pattern.
func (p Pattern) IsWildcard() bool { return p.wildcard }

// Match reports whether o, a canonical Origin from ParseOrigin, is covered
// by p. Schemes must be equal and effective ports equal (the default port is
// normalised: "https://h:443" is "https://h"). An exact pattern matches its
// own origin only. "https://*.example.com" matches a.example.com and
// a.b.example.com but NOT example.com, nor any IP literal. A non-canonical
// o (uppercase, trailing dot, ...) never matches: Match compares spellings,
// it does not canonicalise.
func (p Pattern) Match(o Origin) bool {
	po := p.origin
	if po.Scheme == "" || o.Scheme != po.Scheme || o.EffectivePort() != po.EffectivePort() {
		return false
	}
	if !p.wildcard {
		return o.Host == po.Host
	}
	if _, ok := hostAddr(o.Host); ok {
		return false
	}
	h := strings.TrimSuffix(o.Host, "."+po.Host)
	return len(h) < len(o.Host) && h != "" && h[len(h)-1] != '.'
}

// parseTCP parses the authority of a "tcp://host:port" pattern.
func parseTCP(auth string) (Pattern, error) {
	if strings.ContainsAny(auth, `/\?#@`) {
		// ParseOrigin names which (path, query, fragment, userinfo).
		_, err := ParseOrigin("https://" + auth)
		if err == nil {
			err = wire.Errorf(CodeOriginInvalid, "tcp pattern is not \"tcp://host:port\"")
		}
		return Pattern{}, err
	}
	_, port, err := splitAuthority(auth, CodeOriginInvalid, CodeOriginPortInvalid)
	if err != nil {
		return Pattern{}, err
	}
	if port == 0 {
		return Pattern{}, wire.Errorf(CodeOriginPortInvalid, "a tcp:// pattern needs a port")
	}
	o, err := ParseOrigin("https://" + auth)
	if err != nil {
		return Pattern{}, err
	}
	o.Scheme, o.Port = SchemeTCP, port
	return Pattern{origin: o}, nil
}

// MatchHost reports whether p covers host (canonical, as CanonicalHost
// spells it) for some scheme and port: what a resolver answering only
// for allowed names asks. The zero Pattern matches nothing.
func (p Pattern) MatchHost(host string) bool {
	po := p.origin
	if po.Scheme == "" {
		return false
	}
	if !p.wildcard {
		return host == po.Host
	}
	if _, ok := hostAddr(host); ok {
		return false
	}
	h := strings.TrimSuffix(host, "."+po.Host)
	return len(h) < len(host) && h != "" && h[len(h)-1] != '.'
}
