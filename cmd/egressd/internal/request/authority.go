package request

import (
	"strings"
	"sync"
	"sync/atomic"

	"hostkit.dev/lib/netguard"
)

// Authorities caches netguard.SplitHostPort, which canonicalizes a host
// (IDNA mapping, normalization and numeric checks: a few microseconds,
// ~3 % of a proxied request's CPU when done twice per request) and is a
// pure function of its input. Only successful results are kept, for
// authorities of at most maxCachedAuthority bytes, and at most
// maxAuthorities of them: past that, lookups go to netguard every time
// (no eviction, so no churn and no growth from hostile input). The zero
// value is ready; a nil *Authorities caches nothing. Safe for concurrent
// use.
type Authorities struct {
	m sync.Map // string → authority
	n atomic.Int64
}

// maxAuthorities bounds the entries of an Authorities.
const maxAuthorities = 4096

// maxCachedAuthority is the longest authority cached, in bytes.
const maxCachedAuthority = 300

type authority struct {
	host string
	port uint16
	// What a Record with this host and port formats, for scheme http
	// ([0]) and https ([1]): OriginString and Authority. Empty when not
	// cached.
	origin, hostPort [2]string
}

// SplitHostPort is netguard.SplitHostPort, cached.
func (a *Authorities) SplitHostPort(s string) (host string, port uint16, err error) {
	e, err := a.split(s)
	return e.host, e.port, err
}

// split is SplitHostPort with the cached entry: a cached one carries the
// origin strings too (formatted once, when it was cached).
func (a *Authorities) split(s string) (authority, error) {
	if a == nil {
		host, port, err := netguard.SplitHostPort(s)
		return authority{host: host, port: port}, err
	}
	if v, ok := a.m.Load(s); ok {
		return v.(authority), nil
	}
	host, port, err := netguard.SplitHostPort(s)
	e := authority{host: host, port: port}
	if err == nil && len(s) <= maxCachedAuthority && a.n.Load() < maxAuthorities {
		for i, scheme := range [2]string{netguard.SchemeHTTP, netguard.SchemeHTTPS} {
			r := Record{Scheme: scheme, Host: host, Port: port}
			if r.Port == 0 {
				r.Port = netguard.DefaultPort(scheme)
			}
			e.origin[i], e.hostPort[i] = r.OriginString(), r.Authority()
		}
		if _, loaded := a.m.LoadOrStore(strings.Clone(s), e); !loaded {
			a.n.Add(1)
		}
	}
	return e, err
}
