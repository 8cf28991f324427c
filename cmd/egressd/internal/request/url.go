package request

import (
	"strings"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// parseURL parses an absolute "scheme://authority[path][?query]" strictly:
// scheme http or https (any case), no userinfo, no fragment, no backslash,
// no whitespace or control bytes, no non-ASCII byte outside the host (an
// IDNA name), only valid percent escapes,
// and the authority through netguard.SplitHostPort (canonical host, ports
// 1-65535, no zones, no numeric look-alikes), cached by a when not nil.
func parseURL(s string, a *Authorities) (*Record, error) {
	bad := func(msg string) error { return wire.Errorf(egressdapi.CodeInvalidRequest, "URL %s", msg) }
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= ' ' || c == 0x7f:
			return nil, bad("holds whitespace or a control byte")
		case c == '\\':
			return nil, bad("holds a backslash")
		case c == '#':
			return nil, bad("has a fragment")
		case c == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])):
			return nil, bad("holds an invalid percent escape")
		}
	}
	i := strings.Index(s, "://")
	if i <= 0 {
		return nil, bad(`is not absolute ("scheme://host/...")`)
	}
	scheme := strings.ToLower(s[:i])
	if scheme != netguard.SchemeHTTPS && scheme != netguard.SchemeHTTP {
		return nil, bad(`scheme must be "https" or "http"`)
	}
	rest := s[i+3:]
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	auth, rest := rest[:end], rest[end:]
	if strings.IndexByte(auth, '@') >= 0 {
		return nil, bad("has userinfo")
	}
	if strings.IndexByte(auth, '%') >= 0 {
		return nil, bad("authority holds a percent escape")
	}
	e, err := a.split(auth)
	host, port := e.host, e.port
	if err != nil {
		return nil, wire.Wrap(egressdapi.CodeInvalidRequest, "URL host: "+wire.AsError(err).Msg, err)
	}
	if port == 0 {
		port = netguard.DefaultPort(scheme)
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] >= 0x80 {
			return nil, bad("path or query holds a non-ASCII byte")
		}
	}
	path, query := rest, ""
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		path, query = rest[:q], rest[q+1:]
	}
	if path == "" {
		path = "/"
	}
	rec := &Record{Scheme: scheme, Host: host, Port: port, Path: path, Query: query}
	k := 0
	if scheme == netguard.SchemeHTTPS {
		k = 1
	}
	rec.origin, rec.authority = e.origin[k], e.hostPort[k] // "" when not cached: formatted when asked
	return rec, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// RawAuthority returns the authority of an absolute URL as its caller
// wrote it (before netguard canonicalizes the host), or "" when s has
// none: what host scanning reads besides the canonical host, since a
// spelling that canonicalizes away (case, IDNA mapping) is still the
// caller's text.
func RawAuthority(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return ""
	}
	rest := s[i+3:]
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	return rest
}
