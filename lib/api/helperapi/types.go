package helperapi

// Context is the mutation context that every plan and mutation carries; a
// mutation's context must equal its plan's.
type Context struct {
	// CapabilityDigest is the capability snapshot digest the request was
	// planned against ("sha256:" + 64 hex, from runtime.negotiate); a
	// different current snapshot is capability.mismatch.
	CapabilityDigest string `msgpack:"capability_digest"`
	// Fence is the caller's fence generation for the instance (≥ 1). The
	// helper keeps the highest fence it has seen per instance and refuses
	// a lower one (fence.stale).
	Fence uint64 `msgpack:"fence"`
	// InstanceID is the owning instance: a canonical lowercase UUID.
	InstanceID string `msgpack:"instance_id"`
	// ProjectID is the helper's project UUID (runtime.negotiate, health);
	// another one is project.mismatch.
	ProjectID string `msgpack:"project_id"`
}

// ImageRef names a local OCI image layout and one manifest in it, by
// digest (never by tag).
type ImageRef struct {
	Layout         string `msgpack:"layout"`          // absolute path of the OCI image layout directory
	ManifestDigest string `msgpack:"manifest_digest"` // "sha256:" + 64 hex
}

// NegotiateRequest asks for the active provider. Both fields are optional
// checks: a provider other than the active one is provider.unavailable, a
// codec other than the negotiated one provider.incompatible.
type NegotiateRequest struct {
	Codec    string `msgpack:"codec"`    // e.g. "runc-1.1"
	Provider string `msgpack:"provider"` // "runc" or "crun"
}

// NegotiateResponse describes the active provider, its capability
// snapshot and the helper's project.
type NegotiateResponse struct {
	Capabilities     []string `msgpack:"capabilities"`      // sorted capability names of the snapshot
	CapabilityDigest string   `msgpack:"capability_digest"` // "sha256:" + 64 hex
	Codec            string   `msgpack:"codec"`
	HostKind         string   `msgpack:"host_kind"` // cgroup-v1, cgroup-hybrid, cgroup-v2
	ProjectID        string   `msgpack:"project_id"`
	Provider         string   `msgpack:"provider"`
	Version          string   `msgpack:"version"` // the runtime's version, e.g. "1.1.5"
	Wrapped          bool     `msgpack:"wrapped"` // the runtime runs inside the private-mount-namespace wrapper
}

// Container is one container the helper owns (its annotations name this
// helper's project), as reconciled from the runtime and the helper's
// records.
type Container struct {
	ContainerID string `msgpack:"container_id"`
	CreatedAt   int64  `msgpack:"created_at"` // Unix ms, from the runtime
	Fence       uint64 `msgpack:"fence"`      // from the annotation
	InstanceID  string `msgpack:"instance_id"`
	// Orphan is set for a container left in "created" by a helper process
	// that is gone (a crash between create and start) or without a
	// record: visible, never started by the helper on its own, deletable
	// by exact id.
	Orphan bool   `msgpack:"orphan"`
	Phase  string `msgpack:"phase"`  // the helper's record (Phase*)
	Pid    int64  `msgpack:"pid"`    // host pid of the init process; 0 when stopped
	Status string `msgpack:"status"` // the OCI status: creating, created, running, stopped, paused
}

// ObserveResponse lists the owned containers (sorted by id) and the ids of
// foreign ones in the helper's root (sorted): those have no or other
// annotations and are never touched. Containers in other roots are never
// seen. Digest is the SHA-256 of the canonical encoding of
// {containers, foreign}.
type ObserveResponse struct {
	Containers []Container `msgpack:"containers"`
	Digest     string      `msgpack:"digest"` // "sha256:" + 64 hex
	Foreign    []string    `msgpack:"foreign"`
}

// Layer is one verified layer of an image manifest.
type Layer struct {
	Digest    string `msgpack:"digest"`
	MediaType string `msgpack:"media_type"`
	Size      int64  `msgpack:"size"` // bytes
}

// Evidence is what image.evidence verified: every blob the manifest names
// was read and matched its digest and size.
type Evidence struct {
	Architecture   string  `msgpack:"architecture"`
	ConfigDigest   string  `msgpack:"config_digest"`
	Layers         []Layer `msgpack:"layers"`
	ManifestDigest string  `msgpack:"manifest_digest"`
	OS             string  `msgpack:"os"`
	TotalSize      int64   `msgpack:"total_size"` // bytes of manifest, config and layers
}

// IDRequest names one container by its exact id.
type IDRequest struct {
	ContainerID string `msgpack:"container_id"`
}

// Usage is one resource-usage sample of an owned container.
type Usage struct {
	ContainerID string `msgpack:"container_id"`
	CPUTotalNS  uint64 `msgpack:"cpu_total_ns"`
	MemoryBytes uint64 `msgpack:"memory_bytes"`
	Pids        uint64 `msgpack:"pids"`
	Status      string `msgpack:"status"`
}

// LogsRequest asks for the tail of an owned container's console log.
type LogsRequest struct {
	ContainerID string `msgpack:"container_id"`
	MaxBytes    int64  `msgpack:"max_bytes"` // 0 = DefaultLogBytes; at most MaxLogBytes
}

// LogsResponse is the tail of the console log (stdout and stderr).
type LogsResponse struct {
	Data      []byte `msgpack:"data"`
	Size      int64  `msgpack:"size"`      // the log's whole size in bytes
	Truncated bool   `msgpack:"truncated"` // Data is the last part only
}

// PlanRequest describes one mutation to confirm. Kind create needs Image
// and Command (and may set Env), and the helper picks the container id;
// the other kinds name ContainerID. Terminal must be false: containers
// run detached with their output in the console log.
type PlanRequest struct {
	Command       []string  `msgpack:"command"` // create: argv (process.args)
	ContainerID   string    `msgpack:"container_id"`
	Context       Context   `msgpack:"context"`
	Env           []string  `msgpack:"env"`             // create: "KEY=value"; never logged
	Force         bool      `msgpack:"force"`           // delete: stop a running container first
	Image         *ImageRef `msgpack:"image"`           // create
	Kind          string    `msgpack:"kind"`            // Kind*
	StopTimeoutMS int64     `msgpack:"stop_timeout_ms"` // restart, forced delete: 0 = DefaultStopTimeoutMS
	Terminal      bool      `msgpack:"terminal"`        // must be false
}

// PlanResponse is a confirmed plan. PlanHash is "sha256:" + 64 hex over
// the plan's canonical encoding; it is consumed by one mutation.
type PlanResponse struct {
	ContainerID string `msgpack:"container_id"`
	ExpiresAt   int64  `msgpack:"expires_at"` // Unix ms
	Kind        string `msgpack:"kind"`
	PlanHash    string `msgpack:"plan_hash"`
}

// MutationRequest carries out a plan: container.create, .start, .restart
// and .delete. ContainerID and Context must equal the plan's.
type MutationRequest struct {
	ContainerID string  `msgpack:"container_id"`
	Context     Context `msgpack:"context"`
	PlanHash    string  `msgpack:"plan_hash"`
}

// DeleteResponse reports a deletion. It carries the tail of the
// container's console log (stdout and stderr), read after the container
// stopped (a forced delete's SIGTERM grace included) and before the log
// was removed with it, so a caller keeps what the container wrote while
// it stopped; container.logs can no longer read it once the delete is
// done. Adding these fields is wire-compatible: an older helper sends
// none of them (HasLogTail false).
type DeleteResponse struct {
	ContainerID string `msgpack:"container_id"`
	Deleted     bool   `msgpack:"deleted"`
	// HasLogTail reports that LogTail is the console log's tail (empty
	// when the container wrote nothing). It is false from a helper that
	// predates log_tail, when the log could not be read (the delete still
	// happened; the helper logs helper.delete_log_unread), and in an
	// answer replayed from the helper's state store (a retry after the
	// helper restarted): the answer kept there omits the tail (a kept
	// answer is at most 64 KiB). A caller that needs the output copies it
	// (container.logs) before the delete as a fallback.
	HasLogTail bool `msgpack:"has_log_tail"`
	// LogTail is the last MaxLogBytes (1 MiB) at most of the console log.
	LogTail []byte `msgpack:"log_tail"`
	// LogTruncated: the log was longer than LogTail (its first part is
	// not in the answer).
	LogTruncated bool `msgpack:"log_truncated"`
}

// CancelRequest names an in-flight op of the same peer user, by its
// request id (16 bytes) or by its correlation id.
type CancelRequest struct {
	Corr      string `msgpack:"corr"`
	RequestID []byte `msgpack:"request_id"`
}

// CancelResponse counts the ops that were cancelled.
type CancelResponse struct {
	Cancelled int64 `msgpack:"cancelled"`
}

// Health is the helper's health answer: the common fields and its own.
type Health struct {
	CapabilityDigest string `msgpack:"capability_digest"`
	Codec            string `msgpack:"codec"`
	Epoch            string `msgpack:"epoch"`
	HostKind         string `msgpack:"host_kind"`
	IdleTimeoutMS    int64  `msgpack:"idle_timeout_ms"` // 0 = never exits when idle
	InFlight         int64  `msgpack:"in_flight"`       // ops under way, this one included
	ProjectID        string `msgpack:"project_id"`
	Provider         string `msgpack:"provider"`
	ProviderVersion  string `msgpack:"provider_version"`
	Status           string `msgpack:"status"`
	UptimeMS         int64  `msgpack:"uptime_ms"`
	Version          string `msgpack:"version"`
}
