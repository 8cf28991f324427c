// Package request validates and canonicalizes an outbound HTTP request into
// one Record, once. The same Record feeds policy, the literal-loopback rule,
// injection, scanning, audit and the dialer, so no two of them can read a
// host in different spellings (a check and a dialer that disagree on a
// host is how an egress policy is bypassed).
package request

import (
	"net/http"
	"net/url"
	"strings"

	"hostkit.dev/lib/netguard"
)

// Record is a validated request. Every field is canonical: build one with
// Parse and do not change Scheme, Host or Port afterwards (injection may
// change Path, Query, Header and Body).
type Record struct {
	Method string      // an RFC 9110 token; never TRACE, TRACK or CONNECT
	Scheme string      // "https", or "http"
	Host   string      // netguard.CanonicalHost form (IPv6 in brackets)
	Port   uint16      // the effective port, 1-65535
	Path   string      // escaped path, starting with "/"
	Query  string      // raw query without "?"; "" = none
	Header http.Header // validated; Host, framing, hop-by-hop, proxy and reserved headers removed
	Body   []byte      // at most Limits.MaxBody bytes

	// origin and authority cache OriginString and Authority (a request
	// needs each several times); Scheme, Host and Port never change.
	origin, authority string
}

// Origin returns the request's canonical origin (default port as 0).
func (r *Record) Origin() netguard.Origin {
	o := netguard.Origin{Scheme: r.Scheme, Host: r.Host, Port: r.Port}
	if r.Port == netguard.DefaultPort(r.Scheme) {
		o.Port = 0
	}
	return o
}

// OriginString returns Origin().String(), formatted once per record.
func (r *Record) OriginString() string {
	if r.origin == "" {
		r.origin = r.Origin().String()
	}
	return r.origin
}

// Authority returns "host[:port]" with the default port omitted, the value
// of the Host header egressd sends.
func (r *Record) Authority() string {
	if r.authority == "" {
		o := r.Origin()
		r.authority = netguard.JoinHostPort(o.Host, o.Port)
	}
	return r.authority
}

// Target returns the request target (path and query) as sent.
func (r *Record) Target() string {
	if r.Query == "" {
		return r.Path
	}
	return r.Path + "?" + r.Query
}

// String returns the absolute URL in canonical form.
func (r *Record) String() string {
	return r.Scheme + "://" + r.Authority() + r.Target()
}

// URL returns the record as a *url.URL whose request URI is exactly Target.
func (r *Record) URL() *url.URL {
	u := &url.URL{Scheme: r.Scheme, Host: r.Authority(), RawQuery: r.Query}
	if p, err := url.PathUnescape(r.Path); err == nil {
		u.Path, u.RawPath = p, r.Path
	} else {
		u.Path = r.Path // Parse only accepts valid escapes, so this is unreachable
	}
	if u.EscapedPath() != r.Path {
		u.Opaque = r.Path // keep the exact bytes (url picks its own escaping otherwise)
		if strings.HasPrefix(r.Path, "//") {
			u.Opaque = "//" + r.Authority() + r.Path
		}
	}
	return u
}

// Clone returns a deep copy, so a step can change a request without
// touching its caller's.
func (r *Record) Clone() *Record {
	c := *r
	c.Header = r.Header.Clone()
	if c.Header == nil {
		c.Header = http.Header{}
	}
	c.Body = append([]byte(nil), r.Body...)
	return &c
}
