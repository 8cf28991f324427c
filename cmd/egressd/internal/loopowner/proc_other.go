//go:build !linux

package loopowner

import (
	"net/netip"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// Available reports whether the owner check works on this platform.
const Available = false

// Check is unavailable outside Linux (macOS has no /proc, and lsof would
// be a second, racy source): it refuses every loopback credential with
// egress.loopback_owner_unverified, which is safe. Loopback destinations
// without credentials are unaffected.
func (c Checker) Check(addr netip.AddrPort) ([]uint32, error) {
	return nil, wire.Errorf(egressdapi.CodeLoopbackOwnerUnknown, "the loopback owner check is unavailable on this platform")
}
