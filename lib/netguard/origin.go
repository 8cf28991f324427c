package netguard

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"hostkit.dev/lib/wire"
)

// Scheme names an Origin may carry.
const (
	SchemeHTTPS = "https"
	SchemeHTTP  = "http"
	// SchemeTCP is a raw TCP origin, "tcp://host:port": a policy Pattern
	// only (ParsePattern), for a transparent connection that is neither TLS
	// nor HTTP. ParseOrigin refuses it, so it can never be a credential
	// destination. Its port is always explicit.
	SchemeTCP = "tcp"
)

// maxOriginLen bounds an origin string in bytes before any processing.
const maxOriginLen = 2048

// Origin is a canonical origin (RFC 6454 §4: scheme, host, port) as
// docs/design.md, "Identifiers and schemas", defines it. Values from
// ParseOrigin are canonical; compare them with ==.
type Origin struct {
	// Scheme is "https", or "http" only when Host is a literal loopback host;
	// "tcp" only in a Pattern (ParsePattern), never from ParseOrigin.
	Scheme string
	// Host is in CanonicalHost form: lowercase ASCII, IPv6 in brackets.
	Host string
	// Port is 1-65535; 0 means the scheme's default port (443 for https, 80
	// for http). ParseOrigin stores an explicit default port as 0.
	Port uint16
}

// DefaultPort returns 443 for "https", 80 for "http" and 0 for anything
// else ("tcp" has no default: its port is always explicit).
func DefaultPort(scheme string) uint16 {
	switch scheme {
	case SchemeHTTPS:
		return 443
	case SchemeHTTP:
		return 80
	}
	return 0
}

// String returns "scheme://host[:port]", omitting the scheme's default port
// (and Port 0), with an IPv6 host in brackets (RFC 3986 §3.2.2).
func (o Origin) String() string {
	host := o.Host
	if strings.IndexByte(host, ':') >= 0 && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]"
	}
	s := o.Scheme + "://" + host
	if o.Port != 0 && o.Port != DefaultPort(o.Scheme) {
		s += ":" + strconv.Itoa(int(o.Port))
	}
	return s
}

// EffectivePort returns Port, or the scheme's default port when Port is 0.
func (o Origin) EffectivePort() uint16 {
	if o.Port == 0 {
		return DefaultPort(o.Scheme)
	}
	return o.Port
}

// Hostname returns Host without IPv6 brackets ("::1" for "[::1]"), the form
// net.JoinHostPort and netip.ParseAddr take.
func (o Origin) Hostname() string {
	return strings.TrimSuffix(strings.TrimPrefix(o.Host, "["), "]")
}

// Address returns "host:port" with the effective port, ready for net.Dial
// ("[::1]:80", "api.example.com:443").
func (o Origin) Address() string {
	return JoinHostPort(o.Host, o.EffectivePort())
}

// ParseOrigin parses s as a canonical origin "scheme://authority" with
// nothing after the authority, and returns it in canonical form. It is strict
// (RFC 3986 §3 syntax, RFC 6454 origin, docs/design.md, "Identifiers and
// schemas"):
//
//   - the scheme is case-insensitive "https" or "http", anything else is
//     origin.scheme_unsupported; "http" requires a literal loopback host
//     (IsLiteralLoopback), else origin.plaintext_not_loopback;
//   - userinfo is origin.userinfo; any path, even "/" (or "\"), is
//     origin.path; "?" is origin.query; "#" is origin.fragment;
//   - the port, when present, is 1-65535 in plain decimal with no sign and
//     no leading zero (origin.port_invalid); the scheme's default port is
//     normalised away (":443" on https, ":80" on http);
//   - the host follows CanonicalHost and fails with its host.* codes; an
//     IPv6 host must be in brackets;
//   - whitespace, control characters, a missing "://", or more than 2048
//     bytes is origin.invalid.
//
// "HTTPS://API.Example.COM:443" gives https://api.example.com;
// "http://[::1]:80" gives http://[::1].
func ParseOrigin(s string) (Origin, error) {
	if s == "" || len(s) > maxOriginLen || !utf8.ValidString(s) {
		return Origin{}, wire.Errorf(CodeOriginInvalid, "origin is empty, too long or not UTF-8")
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || unicode.IsControl(r) || unicode.IsSpace(r) {
			return Origin{}, wire.Errorf(CodeOriginInvalid, "origin contains whitespace or a control character")
		}
	}
	i := strings.Index(s, "://")
	if i <= 0 || !validScheme(s[:i]) {
		return Origin{}, wire.Errorf(CodeOriginInvalid, `origin is not "scheme://host[:port]"`)
	}
	scheme := asciiLower(s[:i])
	if scheme != SchemeHTTPS && scheme != SchemeHTTP {
		return Origin{}, wire.Errorf(CodeOriginSchemeUnsupported, `origin scheme must be "https" (or "http" for a loopback host)`)
	}
	auth := s[i+3:]
	if j := strings.IndexAny(auth, `/\?#`); j >= 0 {
		switch auth[j] {
		case '?':
			return Origin{}, wire.Errorf(CodeOriginQuery, "origin has a query")
		case '#':
			return Origin{}, wire.Errorf(CodeOriginFragment, "origin has a fragment")
		default:
			return Origin{}, wire.Errorf(CodeOriginPath, "origin has a path")
		}
	}
	if strings.IndexByte(auth, '@') >= 0 {
		return Origin{}, wire.Errorf(CodeOriginUserinfo, "origin has userinfo")
	}
	raw, port, err := splitAuthority(auth, CodeOriginInvalid, CodeOriginPortInvalid)
	if err != nil {
		return Origin{}, err
	}
	host, err := CanonicalHost(raw)
	if err != nil {
		return Origin{}, err
	}
	if scheme == SchemeHTTP && !(IsLiteralLoopback(raw) && IsLiteralLoopback(host)) {
		return Origin{}, wire.Errorf(CodeOriginPlaintext, `"http" is allowed only for a literal loopback host`)
	}
	if port == DefaultPort(scheme) {
		port = 0
	}
	return Origin{Scheme: scheme, Host: host, Port: port}, nil
}

// CanonicalOrigin returns the canonical spelling of the origin s, i.e.
// ParseOrigin(s).String(), with ParseOrigin's errors.
func CanonicalOrigin(s string) (string, error) {
	o, err := ParseOrigin(s)
	if err != nil {
		return "", err
	}
	return o.String(), nil
}

// validScheme reports whether s matches RFC 3986 §3.1
// ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func validScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !('a' <= c && c <= 'z') && (i == 0 || !('0' <= s[i] && s[i] <= '9' || s[i] == '+' || s[i] == '-' || s[i] == '.')) {
			return false
		}
	}
	return s != ""
}
