package netns

import (
	"net/netip"
	"sync"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// SyntheticPrefix holds the addresses the bridge's resolver gives allowed
// names: 198.18.0.0/15, reserved for benchmarking (RFC 2544, RFC 6890),
// so no real destination is ever shadowed.
var SyntheticPrefix = netip.MustParsePrefix("198.18.0.0/15")

// DefaultMaxNames is the default number of names one instance may resolve
// (supervisord's -synthetic-names).
const DefaultMaxNames = 4096

// maxSynthetic is how many addresses SyntheticPrefix holds past its
// first and before its last.
const maxSynthetic = 1<<17 - 2

// Names maps the names an instance resolved to synthetic addresses and
// back. An address, once given, names its name for the life of the table
// (the instance's): addresses are handed out in order and never reused,
// so a connection to an address always means the name that address was
// given for. Safe for concurrent use.
type Names struct {
	mu     sync.Mutex
	max    int
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
}

// NewNames returns an empty table holding at most max names (0 =
// DefaultMaxNames; more than the prefix holds is capped to it).
func NewNames(max int) *Names {
	if max <= 0 {
		max = DefaultMaxNames
	}
	max = min(max, maxSynthetic)
	return &Names{max: max, byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}}
}

// Assign returns name's synthetic address, giving it the next one when it
// has none. Errors: network.names_exhausted once max names hold one.
func (n *Names) Assign(name string) (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byName[name]; ok {
		return a, nil
	}
	if len(n.byName) >= n.max {
		return netip.Addr{}, wire.Errorf(api.CodeNetworkNamesExhausted, "the instance resolved %d names already (-synthetic-names)", n.max)
	}
	base := SyntheticPrefix.Addr().As4()
	i := uint32(len(n.byName) + 1) // .0 is the prefix's own address: never given
	v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3]) + i
	a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	n.byName[name], n.byAddr[a] = a, name
	return a, nil
}

// Name returns the name a was given for, and reports whether it was.
func (n *Names) Name(a netip.Addr) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.byAddr[a.Unmap()]
	return name, ok
}

// Len returns how many names hold an address.
func (n *Names) Len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.byName)
}
