package loopowner

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// Available reports whether the owner check works on this platform.
const Available = true

// Check returns the UIDs owning the listeners that could accept a
// connection to the loopback address addr, or an error: the listener
// belongs to an agent UID (egress.loopback_owner_agent), or no listener
// was found or the kernel could not be asked (egress.loopback_owner_unverified).
//
// It asks the kernel on every call, never from a cache (a cached owner
// would be a window for an agent to take the port over): a sock_diag(7)
// dump of the TCP listeners on addr's port, which costs the same however
// many connections (TIME_WAIT included) the machine holds. Only when the
// kernel has no sock_diag for TCP does it read /proc/net/tcp and tcp6
// (ProcRoot), which grows with the whole table. Both describe egressd's
// own network namespace. A listener can change between this check and
// the dial; the check narrows, it does not close, that window.
func (c Checker) Check(addr netip.AddrPort) ([]uint32, error) {
	ls, err := netlinkListeners(addr.Port())
	if errors.Is(err, errNetlinkUnavailable) {
		ls, err = c.procListeners()
	}
	if err != nil {
		return nil, wire.Wrap(egressdapi.CodeLoopbackOwnerUnknown, "cannot read the socket table", err)
	}
	return c.decide(addr, ls)
}

// procListeners reads the LISTEN sockets of <ProcRoot>/net/tcp and tcp6
// (a missing tcp6 is fine: no IPv6 in this kernel or namespace).
func (c Checker) procListeners() ([]Listener, error) {
	root := c.ProcRoot
	if root == "" {
		root = "/proc"
	}
	var all []Listener
	found := false
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(root, "net", name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ls, err := parse(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		found = true
		all = append(all, ls...)
	}
	if !found {
		return nil, errors.New("loopowner: no socket table under " + root)
	}
	return all, nil
}
