package netguard

import (
	"strings"

	"hostkit.dev/lib/wire"
)

// Pattern is an egress-policy origin pattern (DESIGN "Main-flow schemas"):
// either a canonical origin, matched exactly, or a wildcard
// "https://*.example.com[:port]". Patterns are for policy only, never a
// credential destination. The zero Pattern matches nothing; build one with
// ParsePattern.
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
func ParsePattern(s string) (Pattern, error) {
	i := strings.Index(s, "://")
	if i < 0 {
		return Pattern{}, wire.Errorf(CodeOriginInvalid, `pattern is not "scheme://host[:port]"`)
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
