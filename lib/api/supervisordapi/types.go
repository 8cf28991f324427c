package supervisordapi

// CredentialSpec asks for one credential under an environment variable.
// The variable holds the lease's placeholder, never the value: egressd
// puts the value in its place on the way out (docs/supervisord.md,
// "Egress"). A credential secretd refuses to stage is
// credentials.unavailable naming secretd's code.
type CredentialSpec struct {
	// Credential is the secretd credential's name; "" or a NUL or
	// newline in it is instance.invalid.
	Credential  string `msgpack:"credential"`
	Destination string `msgpack:"destination"` // origin to stage for; "" when the credential allows one (else lease.ambiguous)
	// Env is the variable's name, [A-Za-z_][A-Za-z0-9_]* of at most 256
	// bytes, unique in the request and not one supervisord sets itself
	// (the proxy, NO_PROXY and CA variables, NODE_USE_ENV_PROXY,
	// WGETRC, HOSTKIT_*); else instance.invalid.
	Env    string `msgpack:"env"`
	Target string `msgpack:"target"` // secretd target to stage for; "" when the credential allows one (else lease.ambiguous)
}

// Network is an instance's network policy. An absent Network, or an
// empty Mode, means supervisord's -default-network (isolated unless the
// operator chose host); the mode it resolved to is recorded in the
// instance's spec and shown as Instance.Network, so an instance keeps it
// across supervisord restarts and flag changes.
type Network struct {
	Allow []string `msgpack:"allow"` // origins (lib/netguard) with every method
	Mode  string   `msgpack:"mode"`  // isolated or host; "" = supervisord's -default-network
}

// ImageRef names a local OCI image layout and one manifest in it by digest
// (never by tag): a runtime container instance's image, verified and
// unpacked by the containerization-helper (helperapi.ImageRef).
type ImageRef struct {
	Layout         string `msgpack:"layout"`          // absolute, clean path of the OCI image layout directory
	ManifestDigest string `msgpack:"manifest_digest"` // "sha256:" + 64 lowercase hex
}

// ProvisionRequest creates (and with Start, starts) an instance.
// Provision is idempotent on InstanceID: the same request answers the same
// instance; a different one is instance.conflict.
type ProvisionRequest struct {
	Command        []string          `msgpack:"command"`         // argv; required: a non-empty first entry, no NUL anywhere (else instance.invalid)
	Credentials    []CredentialSpec  `msgpack:"credentials"`     // staged at secretd and registered at egressd before the agent starts, all or nothing; runtime container: must be absent
	Env            map[string]string `msgpack:"env"`             // added to the agent's environment; no NUL or newline in keys or values, no '=' in keys
	Image          *ImageRef         `msgpack:"image"`           // runtime container: the image to run (required); runtime host: must be absent
	InstanceID     string            `msgpack:"instance_id"`     // canonical UUID; "" = generated
	Labels         map[string]string `msgpack:"labels"`          // free-form, kept and shown in Instance.Labels; supervisord does not read them
	Loadout        string            `msgpack:"loadout"`         // given to the agent as HOSTKIT_LOADOUT
	MaxRestarts    int64             `msgpack:"max_restarts"`    // restart on-failure: consecutive restarts at most; 0 = DefaultMaxRestarts, ≤ MaxMaxRestarts
	Name           string            `msgpack:"name"`            // a label for people, shown in Instance.Name; not unique, not an id
	Network        *Network          `msgpack:"network"`         // nil = supervisord's -default-network and no allow list; runtime container: must be nil
	Profile        string            `msgpack:"profile"`         // given to the agent as HOSTKIT_PROFILE
	PTY            bool              `msgpack:"pty"`             // run the agent on a pseudo-terminal; runtime container: must be false
	PTYCols        uint16            `msgpack:"pty_cols"`        // 0 = DefaultCols
	PTYRows        uint16            `msgpack:"pty_rows"`        // 0 = DefaultRows
	Restart        string            `msgpack:"restart"`         // never (default) or on-failure
	Runtime        string            `msgpack:"runtime"`         // host (default; needs -host-runtime-enabled) or container
	SessionBackend string            `msgpack:"session_backend"` // native (default) or tmux
	Start          bool              `msgpack:"start"`           // start the agent now (false: state created)
	StopTimeoutMS  int64             `msgpack:"stop_timeout_ms"` // 1000..300000; 0 = 10000
	WorkingDir     string            `msgpack:"working_dir"`     // must exist and be a directory; "" = the configured default
}

// ExitStatus is how an instance's leader ended. Unknown means it was not
// observed (the holder died, or the recorded pid was no longer ours).
type ExitStatus struct {
	Code    int64  `msgpack:"code"`    // exit code, 0-255 (when Signal is "")
	Signal  string `msgpack:"signal"`  // terminating signal name, e.g. SIGKILL
	Unknown bool   `msgpack:"unknown"` // the end was not observed
}

// Instance is an instance's status.
type Instance struct {
	AgentUID       uint32            `msgpack:"agent_uid"`       // the uid the agent runs as; supervisord's own when Isolated is false
	BootID         string            `msgpack:"boot_id"`         // the kernel boot id (/proc/sys/kernel/random/boot_id) the agent started in; "" before it started
	Command        []string          `msgpack:"command"`         // the request's argv
	ContainerID    string            `msgpack:"container_id"`    // runtime container: the helper's container id ("" before it was created)
	CreatedAt      int64             `msgpack:"created_at"`      // Unix ms
	Exit           *ExitStatus       `msgpack:"exit"`            // how the leader ended; nil while it runs or before it started
	ExitedAt       int64             `msgpack:"exited_at"`       // Unix ms; 0 while the tree runs
	Image          *ImageRef         `msgpack:"image"`           // runtime container: the image it runs
	InstanceID     string            `msgpack:"instance_id"`     // canonical lowercase UUID (CanonicalID)
	Isolated       bool              `msgpack:"isolated"`        // the agent runs under its own uid
	Labels         map[string]string `msgpack:"labels"`          // the request's
	Loadout        string            `msgpack:"loadout"`         // the request's
	Name           string            `msgpack:"name"`            // the request's
	Network        string            `msgpack:"network"`         // the mode the instance runs in: isolated, host, or none (runtime container)
	PGID           int64             `msgpack:"pgid"`            // the agent's process group (its own session's); 0 before it started
	PID            int64             `msgpack:"pid"`             // the agent leader's pid (the current one after an on-failure restart); 0 before it started
	Profile        string            `msgpack:"profile"`         // the request's
	PTY            bool              `msgpack:"pty"`             // the agent runs on a pseudo-terminal
	Restart        string            `msgpack:"restart"`         // never or on-failure
	Restarts       int64             `msgpack:"restarts"`        // restarts the holder made (on-failure), in all
	Runtime        string            `msgpack:"runtime"`         // host or container
	Session        string            `msgpack:"session"`         // direct or managed
	SessionBackend string            `msgpack:"session_backend"` // native or tmux; "" for runtime container
	StartedAt      int64             `msgpack:"started_at"`      // Unix ms
	State          string            `msgpack:"state"`           // one of the State* constants
	StopTimeoutMS  int64             `msgpack:"stop_timeout_ms"` // ms a stop waits after SIGTERM, the default applied
	TmuxSocket     string            `msgpack:"tmux_socket"`     // session_backend tmux: the tmux server's socket (`tmux -S <it> attach`, as root); "" otherwise
	Warning        string            `msgpack:"warning"`         // e.g. NotIsolatedWarning, HostNetworkWarning; "; "-joined
	WatchAgent     string            `msgpack:"watch_agent"`     // host-<first 8 hex>
	WorkingDir     string            `msgpack:"working_dir"`     // the agent's working directory, the default applied; "" for runtime container
}

// IDRequest names one instance (status, stop, destroy).
type IDRequest struct {
	InstanceID string `msgpack:"instance_id"` // a UUID (CanonicalID; else instance.invalid_id); instance.not_found when none has it
}

// ListResponse lists every instance, by creation time.
type ListResponse struct {
	Instances []Instance `msgpack:"instances"` // every instance, oldest first
	Warning   string     `msgpack:"warning"`   // supervisord-wide: NotIsolatedWarning when not root; "" otherwise
}

// SignalRequest sends a signal to the instance's process group.
type SignalRequest struct {
	InstanceID string `msgpack:"instance_id"` // as IDRequest.InstanceID; instance.not_running when no holder serves it
	// Signal is a number 1..64, or a name of this system's signals
	// (signal(7): HUP, INT, TERM, KILL, USR1, WINCH, ...) with or without
	// "SIG", in any case; else signal.invalid.
	Signal string `msgpack:"signal"`
}

// DestroyResponse reports a destroyed instance.
type DestroyResponse struct {
	InstanceID string `msgpack:"instance_id"` // the destroyed instance, canonical
}

// LogsRequest reads an instance's output log: its last TailBytes bytes
// (0 = 64 KiB, at most MaxTailBytes); with Follow, an instance.logs stream
// then carries data frames as output arrives and an exit frame at the end.
type LogsRequest struct {
	Follow     bool   `msgpack:"follow"`      // keep the stream open and send output as it arrives; runtime container: must be false
	InstanceID string `msgpack:"instance_id"` // as IDRequest.InstanceID
	TailBytes  int64  `msgpack:"tail_bytes"`  // bytes of the current log file; ≤ 0 = DefaultTailBytes, more than MaxTailBytes is cut to it
}

// LogsResponse holds the tail (without Follow; with Follow the tail comes
// as the stream's first data frame).
type LogsResponse struct {
	Data    []byte `msgpack:"data"`    // the tail; empty before the first output, and with Follow
	Warning string `msgpack:"warning"` // as ListResponse.Warning
}

// Log tail bounds, in bytes.
const (
	DefaultTailBytes = 64 << 10 // 64 KiB
	MaxTailBytes     = 4 << 20  // 4 MiB
)

// AttachRequest attaches to an instance's terminal. The stream replays the
// holder's ring buffer, then carries output as data frames; the client sends
// data (input), resize and detach frames; the server ends with exit or
// error.
type AttachRequest struct {
	Cols       uint16 `msgpack:"cols"`        // initial size in columns; 0 = leave as is
	InstanceID string `msgpack:"instance_id"` // as IDRequest.InstanceID; instance.exited once it ended, instance.not_running without a holder
	Rows       uint16 `msgpack:"rows"`        // initial size in lines; 0 = leave as is
}

// AttachBacklog is how far, in bytes of output, an attach client may fall
// behind at any hop (the holder, supervisord's relay, hostctl's own
// standard output) before it is dropped: the hop sends one whole error
// frame with CodeStreamSlow and closes, and the agent runs on
// (docs/supervisord.md, "Attach"). Output the kernel already holds in the
// connection's send buffer is not counted.
const AttachBacklog = 4 << 20

// AttachResponse accepts an attach.
type AttachResponse struct {
	State string `msgpack:"state"` // the instance's recorded state (State*) when the attach was accepted
}

// Health is supervisord's health body beyond healthapi.Response.
type Health struct {
	AgentsIsolated     bool             `msgpack:"agents_isolated"`      // supervisord runs as root, so each agent gets a uid of its own
	DefaultNetwork     string           `msgpack:"default_network"`      // -default-network: the mode of a request that names none
	HostRuntimeEnabled bool             `msgpack:"host_runtime_enabled"` // -host-runtime-enabled: runtime host is served
	Instances          map[string]int64 `msgpack:"instances"`            // count by state
	NetworkIsolation   bool             `msgpack:"network_isolation"`    // a network and mount namespace could be made at start (network isolated works)
	// Warning joins, with "; ", NotIsolatedWarning, a note that network
	// isolation is unavailable while it is the default, and egress
	// warnings; "" when there are none.
	Warning string `msgpack:"warning"`
}
