// Package supervisordapi is supervisord's wire API (issue 6, DESIGN.md
// "Agents and isolation"): op names, the admin role, request and response
// bodies, error codes and a typed client. Struct fields are declared in
// bytewise order of their msgpack keys, as the canonical encoding requires
// (wire.CheckSchema tests it).
package supervisordapi

import "hostkit.dev/lib/rpc"

// Op names. Every instance op needs the admin role.
const (
	OpProvision = "instance.provision"
	OpStatus    = "instance.status"
	OpList      = "instance.list"
	OpStop      = "instance.stop"
	OpDestroy   = "instance.destroy"
	OpSignal    = "instance.signal"
	OpLogs      = "instance.logs"
	OpAttach    = "instance.attach"
)

// RoleAdmin holds every instance op (DESIGN.md's role table).
const RoleAdmin rpc.Role = "admin"

// Runtimes a provision request may name.
const (
	RuntimeHost      = "host"      // the default; needs -host-runtime-enabled
	RuntimeContainer = "container" // through the containerization-helper; never run on the host (docs/supervisord.md, "runtime: container")
)

// Session backends and session kinds.
const (
	BackendNative  = "native" // the holder owns the agent's PTY (session "direct")
	BackendTmux    = "tmux"   // a tmux server per instance (session "managed")
	SessionDirect  = "direct"
	SessionManaged = "managed"
)

// Network modes. A request that names none gets supervisord's
// -default-network, DefaultNetwork unless the operator chose otherwise.
const (
	// NetworkHost: the agent shares the host's network; only programs that
	// honour the proxy variables go through egressd (HostNetworkWarning).
	NetworkHost = "host"
	// NetworkIsolated: the agent runs in network and mount namespaces of
	// its own whose only way out is egressd, through the holder's bridge.
	NetworkIsolated = "isolated"
	// DefaultNetwork is -default-network's default.
	DefaultNetwork = NetworkIsolated
	// NetworkNone is shown (never requested) for a runtime container
	// instance: the container gets its own network namespace with no
	// interface configured, so it reaches no network at all.
	NetworkNone = "none"
)

// Instance states.
const (
	StateCreated      = "created"       // provisioned with start=false
	StateRunning      = "running"       // the leader runs
	StateLeaderExited = "leader_exited" // the leader exited but descendants remain; stop cleans them
	StateRestarting   = "restarting"    // restart on-failure: the tree ended with a failure; the next start waits out its backoff
	StateStopping     = "stopping"
	StateStopped      = "stopped" // stopped by instance.stop: leader reaped, no descendant left
	StateExited       = "exited"  // the tree ended on its own (or its end could not be observed: Exit.Unknown)
	StateCredsLost    = "credentials_lost"
)

// Restart policies and bounds (restart on-failure: a non-zero exit, a
// signal or an unobserved end restarts the agent after 1 s, 2 s, 4 s …
// at most 60 s, for at most MaxRestarts consecutive failures; a run that
// lasted 60 s resets both).
const (
	RestartNever       = "never"
	RestartOnFailure   = "on-failure"
	DefaultMaxRestarts = 10
	MaxMaxRestarts     = 1000
)

// IsolatedProxyAddress is where an agent in network isolated reaches
// egressd: the holder's listener inside the agent's network namespace,
// bridged to egressd's proxy.sock.
const IsolatedProxyAddress = "127.0.0.1:4750"

// Stop timeout bounds and default, in milliseconds.
const (
	MinStopTimeoutMS     = 1000
	MaxStopTimeoutMS     = 300_000
	DefaultStopTimeoutMS = 10_000
)

// PTY size default.
const (
	DefaultRows = 24
	DefaultCols = 80
)

// NotIsolatedWarning is the warning given when agents run under
// supervisord's own uid.
const NotIsolatedWarning = "agents are not isolated: supervisord is not root, so agents run under its own uid"

// HostNetworkWarning is the warning status and list give for an instance
// in network host.
const HostNetworkWarning = "network host: egress policy is not enforced for programs that ignore the proxy variables"
