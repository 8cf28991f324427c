// Package netns gives an agent a network namespace of its own whose only
// interface is loopback (docs/design.md, "Agents and isolation"), and a mount
// namespace of its own whose /etc/resolv.conf and /etc/hosts are the
// instance's, and bridges the proxy listener inside it to egressd's proxy
// Unix socket, so that the agent can reach egressd and nothing else.
//
// A namespace is entered by one locked OS thread that never leaves it: the
// listener is opened and every agent is started (forked) on that thread,
// so they inherit the namespace; the rest of the holder stays on the host
// network. Pathname Unix sockets are not scoped by network namespace, so
// the bridge dials egressd's proxy.sock from any thread.
package netns

import (
	"errors"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// ProxyAddress is the bridge's listen address inside the namespace.
const ProxyAddress = api.IsolatedProxyAddress

// errClosed is returned by Do after Close.
var errClosed = errors.New("netns: namespace closed")

// unavailable wraps why a namespace could not be made as
// network.unavailable: never a silent fallback to the host network.
func unavailable(err error) error {
	return wire.Wrap(api.CodeNetworkUnavailable, "network isolated is unavailable: network and mount namespaces need root (CAP_SYS_ADMIN) on Linux; the agent was not started", err)
}
