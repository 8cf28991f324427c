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
// belongs to an agent UID (egress.loopback_owner_agent), or no listener or
// no table was found (egress.loopback_owner_unverified). It reads the
// tables of egressd's own network namespace. A listener can change between
// this check and the dial; the check narrows, it does not close, that
// window.
func (c Checker) Check(addr netip.AddrPort) ([]uint32, error) {
	root := c.ProcRoot
	if root == "" {
		root = "/proc"
	}
	var all []Listener
	found := false
	for _, name := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(root, "net", name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // no IPv6 in this kernel or namespace
		}
		if err != nil {
			return nil, wire.Wrap(egressdapi.CodeLoopbackOwnerUnknown, "cannot read the socket table", err)
		}
		ls, err := parse(f)
		f.Close()
		if err != nil {
			return nil, wire.Wrap(egressdapi.CodeLoopbackOwnerUnknown, "cannot read the socket table", err)
		}
		found = true
		all = append(all, ls...)
	}
	if !found {
		return nil, wire.Errorf(egressdapi.CodeLoopbackOwnerUnknown, "no socket table")
	}
	return c.decide(addr, all)
}
