package supervisordapi

// CredentialSpec asks for one credential under an environment variable.
type CredentialSpec struct {
	Credential  string `msgpack:"credential"`
	Destination string `msgpack:"destination"` // optional when the credential allows one
	Env         string `msgpack:"env"`
	Target      string `msgpack:"target"` // optional when the credential allows one
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
	Command        []string          `msgpack:"command"` // argv; required
	Credentials    []CredentialSpec  `msgpack:"credentials"`
	Env            map[string]string `msgpack:"env"`         // no NUL or newline in keys or values
	Image          *ImageRef         `msgpack:"image"`       // runtime container: the image to run (required); runtime host: must be absent
	InstanceID     string            `msgpack:"instance_id"` // canonical UUID; "" = generated
	Labels         map[string]string `msgpack:"labels"`
	Loadout        string            `msgpack:"loadout"`      // given to the agent as HOSTKIT_LOADOUT
	MaxRestarts    int64             `msgpack:"max_restarts"` // restart on-failure: consecutive restarts at most; 0 = DefaultMaxRestarts, ≤ MaxMaxRestarts
	Name           string            `msgpack:"name"`
	Network        *Network          `msgpack:"network"`
	Profile        string            `msgpack:"profile"` // given to the agent as HOSTKIT_PROFILE
	PTY            bool              `msgpack:"pty"`
	PTYCols        uint16            `msgpack:"pty_cols"`        // 0 = DefaultCols
	PTYRows        uint16            `msgpack:"pty_rows"`        // 0 = DefaultRows
	Restart        string            `msgpack:"restart"`         // never (default) or on-failure
	Runtime        string            `msgpack:"runtime"`         // host (default) or container
	SessionBackend string            `msgpack:"session_backend"` // native (default) or tmux
	Start          bool              `msgpack:"start"`           // start the agent now (false: state created)
	StopTimeoutMS  int64             `msgpack:"stop_timeout_ms"` // 1000..300000; 0 = 10000
	WorkingDir     string            `msgpack:"working_dir"`     // must exist and be a directory; "" = the configured default
}

// ExitStatus is how an instance's leader ended. Unknown means it was not
// observed (the holder died, or the recorded pid was no longer ours).
type ExitStatus struct {
	Code    int64  `msgpack:"code"`    // exit code (when Signal is "")
	Signal  string `msgpack:"signal"`  // terminating signal name, e.g. SIGKILL
	Unknown bool   `msgpack:"unknown"` // the end was not observed
}

// Instance is an instance's status.
type Instance struct {
	AgentUID       uint32            `msgpack:"agent_uid"`
	BootID         string            `msgpack:"boot_id"`
	Command        []string          `msgpack:"command"`
	ContainerID    string            `msgpack:"container_id"` // runtime container: the helper's container id ("" before it was created)
	CreatedAt      int64             `msgpack:"created_at"`   // Unix ms
	Exit           *ExitStatus       `msgpack:"exit"`
	ExitedAt       int64             `msgpack:"exited_at"` // Unix ms
	Image          *ImageRef         `msgpack:"image"`     // runtime container: the image it runs
	InstanceID     string            `msgpack:"instance_id"`
	Isolated       bool              `msgpack:"isolated"` // the agent runs under its own uid
	Labels         map[string]string `msgpack:"labels"`
	Loadout        string            `msgpack:"loadout"`
	Name           string            `msgpack:"name"`
	Network        string            `msgpack:"network"` // the mode the instance runs in: isolated, host, or none (runtime container)
	PGID           int64             `msgpack:"pgid"`
	PID            int64             `msgpack:"pid"`
	Profile        string            `msgpack:"profile"`
	PTY            bool              `msgpack:"pty"`
	Restart        string            `msgpack:"restart"`  // never or on-failure
	Restarts       int64             `msgpack:"restarts"` // restarts the holder made (on-failure), in all
	Runtime        string            `msgpack:"runtime"`
	Session        string            `msgpack:"session"` // direct or managed
	SessionBackend string            `msgpack:"session_backend"`
	StartedAt      int64             `msgpack:"started_at"` // Unix ms
	State          string            `msgpack:"state"`
	StopTimeoutMS  int64             `msgpack:"stop_timeout_ms"`
	TmuxSocket     string            `msgpack:"tmux_socket"` // session_backend tmux: the tmux server's socket (`tmux -S <it> attach`, as root); "" otherwise
	Warning        string            `msgpack:"warning"`     // e.g. NotIsolatedWarning, HostNetworkWarning; "; "-joined
	WatchAgent     string            `msgpack:"watch_agent"` // host-<first 8 hex>
	WorkingDir     string            `msgpack:"working_dir"`
}

// IDRequest names one instance (status, stop, destroy).
type IDRequest struct {
	InstanceID string `msgpack:"instance_id"`
}

// ListResponse lists every instance, by creation time.
type ListResponse struct {
	Instances []Instance `msgpack:"instances"`
	Warning   string     `msgpack:"warning"`
}

// SignalRequest sends a signal to the instance's process group.
type SignalRequest struct {
	InstanceID string `msgpack:"instance_id"`
	Signal     string `msgpack:"signal"` // name (TERM, SIGTERM, HUP...) or number
}

// DestroyResponse reports a destroyed instance.
type DestroyResponse struct {
	InstanceID string `msgpack:"instance_id"`
}

// LogsRequest reads an instance's output log: its last TailBytes bytes
// (0 = 64 KiB, at most MaxTailBytes); with Follow, an instance.logs stream
// then carries data frames as output arrives and an exit frame at the end.
type LogsRequest struct {
	Follow     bool   `msgpack:"follow"`
	InstanceID string `msgpack:"instance_id"`
	TailBytes  int64  `msgpack:"tail_bytes"`
}

// LogsResponse holds the tail (without Follow; with Follow the tail comes
// as the stream's first data frame).
type LogsResponse struct {
	Data    []byte `msgpack:"data"`
	Warning string `msgpack:"warning"`
}

// Log tail bounds, in bytes.
const (
	DefaultTailBytes = 64 << 10
	MaxTailBytes     = 4 << 20
)

// AttachRequest attaches to an instance's terminal. The stream replays the
// holder's ring buffer, then carries output as data frames; the client sends
// data (input), resize and detach frames; the server ends with exit or
// error.
type AttachRequest struct {
	Cols       uint16 `msgpack:"cols"` // initial size; 0 = leave as is
	InstanceID string `msgpack:"instance_id"`
	Rows       uint16 `msgpack:"rows"`
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
	State string `msgpack:"state"`
}

// Health is supervisord's health body beyond healthapi.Response.
type Health struct {
	AgentsIsolated     bool             `msgpack:"agents_isolated"`
	DefaultNetwork     string           `msgpack:"default_network"` // -default-network: the mode of a request that names none
	HostRuntimeEnabled bool             `msgpack:"host_runtime_enabled"`
	Instances          map[string]int64 `msgpack:"instances"`         // count by state
	NetworkIsolation   bool             `msgpack:"network_isolation"` // a network and mount namespace could be made at start (network isolated works)
	Warning            string           `msgpack:"warning"`
}
