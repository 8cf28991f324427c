// Package supervisordapi is supervisord's wire API (docs/supervisord.md):
// op names, the admin role, request and response bodies, error codes and a
// typed client. Struct fields are declared in bytewise order of their
// msgpack keys, as the canonical encoding requires (wire.CheckSchema tests
// it). Times are int64 Unix milliseconds and a zero field is absent on the
// wire (docs/protocol.md, "Canonical encoding").
package supervisordapi

import "hostkit.dev/lib/rpc"

// Op names. Every instance op needs the admin role.
const (
	// OpProvision creates an instance, and starts it with Start;
	// idempotent on its instance id: ProvisionRequest → Instance.
	OpProvision = "instance.provision"
	// OpStatus reports one instance: IDRequest → Instance.
	OpStatus = "instance.status"
	// OpList reports every instance: empty → ListResponse.
	OpList = "instance.list"
	// OpStop stops an instance's whole process tree (SIGTERM, its stop
	// timeout, then SIGKILL) and releases its egress: IDRequest →
	// Instance.
	OpStop = "instance.stop"
	// OpDestroy stops an instance and removes its directory:
	// IDRequest → DestroyResponse.
	OpDestroy = "instance.destroy"
	// OpSignal sends a signal to an instance's process group:
	// SignalRequest → empty.
	OpSignal = "instance.signal"
	// OpLogs reads an instance's output log, a stream op even without
	// Follow (docs/supervisord.md, "hostctl"): LogsRequest →
	// LogsResponse, then with Follow data frames and an exit frame.
	OpLogs = "instance.logs"
	// OpAttach attaches to an instance's terminal, a stream op
	// (docs/supervisord.md, "Attach"): AttachRequest → AttachResponse,
	// then stream frames both ways.
	OpAttach = "instance.attach"
)

// RoleAdmin holds every instance op: supervisord's -admin-users (names or
// UIDs; empty = supervisord's own user).
const RoleAdmin rpc.Role = "admin"

// Runtimes a provision request may name.
const (
	RuntimeHost      = "host"      // the default; needs -host-runtime-enabled
	RuntimeContainer = "container" // through the containerization-helper; never run on the host (docs/supervisord.md, "runtime: container")
)

// Session backends and session kinds.
const (
	BackendNative  = "native"  // the holder owns the agent's PTY (session "direct")
	BackendTmux    = "tmux"    // a tmux server per instance (session "managed")
	SessionDirect  = "direct"  // the session of BackendNative: attach goes through supervisord
	SessionManaged = "managed" // the session of BackendTmux: attach with `tmux -S <tmux_socket> attach` (root)
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
	StateCreated      = "created"          // provisioned with start=false
	StateRunning      = "running"          // the leader runs
	StateLeaderExited = "leader_exited"    // the leader exited but descendants remain; stop cleans them
	StateRestarting   = "restarting"       // restart on-failure: the tree ended with a failure; the next start waits out its backoff
	StateStopping     = "stopping"         // instance.stop (or destroy) is stopping the tree
	StateStopped      = "stopped"          // stopped by instance.stop: leader reaped, no descendant left
	StateExited       = "exited"           // the tree ended on its own (or its end could not be observed: Exit.Unknown)
	StateCredsLost    = "credentials_lost" // the tree runs, but egressd restarted and its credentialed bundle is not registered again (yet)
)

// Restart policies and bounds (restart on-failure: a non-zero exit, a
// signal or an unobserved end restarts the agent after 1 s, 2 s, 4 s …
// at most 60 s, for at most MaxRestarts consecutive failures; a run that
// lasted 60 s resets both).
const (
	RestartNever       = "never"      // the default: an ended tree stays ended
	RestartOnFailure   = "on-failure" // the holder restarts the agent after a failure, with backoff
	DefaultMaxRestarts = 10           // max_restarts when on-failure gives 0
	MaxMaxRestarts     = 1000         // the largest max_restarts; more is instance.invalid
)

// IsolatedProxyAddress is where an agent in network isolated reaches
// egressd: the holder's listener inside the agent's network namespace,
// bridged to egressd's proxy.sock.
const IsolatedProxyAddress = "127.0.0.1:4750"

// Stop timeout bounds and default, in milliseconds: how long a stop waits
// after SIGTERM before it kills the tree (ProvisionRequest.StopTimeoutMS;
// outside the bounds is instance.invalid).
const (
	MinStopTimeoutMS     = 1000    // 1 second
	MaxStopTimeoutMS     = 300_000 // 5 minutes
	DefaultStopTimeoutMS = 10_000  // 10 seconds: the timeout of a request that gives 0
)

// PTY size default, in character cells, for a PTY request that gives 0.
const (
	DefaultRows = 24 // lines
	DefaultCols = 80 // columns
)

// NotIsolatedWarning is the warning given when agents run under
// supervisord's own uid.
const NotIsolatedWarning = "agents are not isolated: supervisord is not root, so agents run under its own uid"

// HostNetworkWarning is the warning status and list give for an instance
// in network host.
const HostNetworkWarning = "network host: egress policy is not enforced for programs that ignore the proxy variables"
