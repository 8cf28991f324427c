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
	// Layout is the absolute, clean path of the OCI image layout
	// directory (image-spec image-layout.md), read only as far as the
	// peer could read it itself; else image.path_unsafe.
	Layout string `msgpack:"layout"`
	// ManifestDigest selects the manifest: "sha256:" + 64 lowercase hex
	// (else request.invalid). Required in a create plan; image.evidence
	// takes "" when the index lists exactly one manifest (else
	// image.ambiguous).
	ManifestDigest string `msgpack:"manifest_digest"`
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
	CapabilityDigest string   `msgpack:"capability_digest"` // "sha256:" + 64 hex over the snapshot's canonical encoding: Context.CapabilityDigest
	Codec            string   `msgpack:"codec"`             // the exact codec of the runtime's output: "runc-1.1" or "crun-1.8"
	HostKind         string   `msgpack:"host_kind"`         // cgroup-v1, cgroup-hybrid, cgroup-v2
	ProjectID        string   `msgpack:"project_id"`        // the helper's project: a canonical lowercase UUID, kept in its state
	Provider         string   `msgpack:"provider"`          // "runc" or "crun" (-runtime)
	Version          string   `msgpack:"version"`           // the runtime's version, e.g. "1.1.5"
	Wrapped          bool     `msgpack:"wrapped"`           // the runtime runs inside the private-mount-namespace wrapper
}

// Container is one container the helper owns (its annotations name this
// helper's project), as reconciled from the runtime and the helper's
// records.
type Container struct {
	ContainerID string `msgpack:"container_id"` // "hk-" + 16 lowercase hex (ContainerIDPrefix)
	CreatedAt   int64  `msgpack:"created_at"`   // Unix ms, from the runtime; 0 when it reports none
	Fence       uint64 `msgpack:"fence"`        // from the annotation (AnnotationFence); 0 when unreadable
	InstanceID  string `msgpack:"instance_id"`  // the owning instance, from the annotation (AnnotationInstance)
	// Orphan is set for a container left in "created" by a helper process
	// that is gone (a crash between create and start) or without a
	// record: visible, never started by the helper on its own, deletable
	// by exact id.
	Orphan bool   `msgpack:"orphan"`
	Phase  string `msgpack:"phase"`  // the helper's record (Phase*); PhaseUntracked without one
	Pid    int64  `msgpack:"pid"`    // host pid of the init process; 0 when stopped
	Status string `msgpack:"status"` // the OCI status: creating, created, running, stopped, paused
}

// ObserveResponse lists the owned containers (sorted by id) and the ids of
// foreign ones in the helper's root (sorted): those have no or other
// annotations and are never touched. Containers in other roots are never
// seen. Digest is the SHA-256 of the canonical encoding of
// {containers, foreign}.
type ObserveResponse struct {
	Containers []Container `msgpack:"containers"` // the owned containers, sorted by ContainerID
	Digest     string      `msgpack:"digest"`     // "sha256:" + 64 hex
	Foreign    []string    `msgpack:"foreign"`    // ids of the other containers in the root, sorted
}

// Layer is one verified layer of an image manifest.
type Layer struct {
	Digest    string `msgpack:"digest"`     // "sha256:" + 64 hex of the layer blob as stored (compressed)
	MediaType string `msgpack:"media_type"` // an OCI tar or tar+gzip layer media type (image-spec layer.md)
	Size      int64  `msgpack:"size"`       // bytes of the blob as stored
}

// Evidence is what image.evidence verified: every blob the manifest names
// was read and matched its digest and size.
type Evidence struct {
	Architecture   string  `msgpack:"architecture"`    // the image config's architecture (GOARCH values: "amd64", "arm64")
	ConfigDigest   string  `msgpack:"config_digest"`   // "sha256:" + 64 hex of the image config blob
	Layers         []Layer `msgpack:"layers"`          // in the manifest's order, base layer first
	ManifestDigest string  `msgpack:"manifest_digest"` // "sha256:" + 64 hex of the verified manifest
	OS             string  `msgpack:"os"`              // the image config's os (GOOS values: "linux")
	TotalSize      int64   `msgpack:"total_size"`      // bytes of manifest, config and layers
}

// IDRequest names one container by its exact id.
type IDRequest struct {
	// ContainerID is "hk-" + 16 lowercase hex (else
	// container.invalid_id) of a container whose project annotation is
	// this helper's (else container.not_owned).
	ContainerID string `msgpack:"container_id"`
}

// Usage is one resource-usage sample of an owned container.
//
// Usage is zero but for ContainerID and Status when the container is
// neither running nor paused.
type Usage struct {
	ContainerID string `msgpack:"container_id"` // the container sampled
	CPUTotalNS  uint64 `msgpack:"cpu_total_ns"` // CPU time the container's cgroup has used, nanoseconds
	MemoryBytes uint64 `msgpack:"memory_bytes"` // memory the container's cgroup uses now, bytes
	Pids        uint64 `msgpack:"pids"`         // tasks in the cgroup now
	Status      string `msgpack:"status"`       // the OCI status: creating, created, running, stopped, paused
}

// LogsRequest asks for the tail of an owned container's console log.
type LogsRequest struct {
	ContainerID string `msgpack:"container_id"` // as IDRequest.ContainerID
	MaxBytes    int64  `msgpack:"max_bytes"`    // 0 = DefaultLogBytes; at most MaxLogBytes (else request.invalid)
}

// LogsResponse is the tail of the console log (stdout and stderr).
type LogsResponse struct {
	Data      []byte `msgpack:"data"`      // the log's last bytes, at most the asked size; empty when it wrote nothing yet
	Size      int64  `msgpack:"size"`      // the log's whole size in bytes
	Truncated bool   `msgpack:"truncated"` // Data is the last part only
}

// PlanRequest describes one mutation to confirm. Kind create needs Image
// and Command (and may set Env), and the helper picks the container id;
// the other kinds name ContainerID. Terminal must be false: containers
// run detached with their output in the console log.
type PlanRequest struct {
	Command       []string  `msgpack:"command"`         // create: argv (process.args), 1..MaxArgs entries without NUL, the first non-empty
	ContainerID   string    `msgpack:"container_id"`    // start, restart, delete: the container (IDRequest.ContainerID); create: "" (the helper picks it)
	Context       Context   `msgpack:"context"`         // the mutation context; the mutation must present the same
	Env           []string  `msgpack:"env"`             // create: at most MaxEnv unique "KEY=value" without NUL or newline; never logged
	Force         bool      `msgpack:"force"`           // delete: stop a running container first
	Image         *ImageRef `msgpack:"image"`           // create
	Kind          string    `msgpack:"kind"`            // Kind*
	StopTimeoutMS int64     `msgpack:"stop_timeout_ms"` // restart, forced delete: ms; 0 = DefaultStopTimeoutMS, else MinStopTimeoutMS..MaxStopTimeoutMS
	Terminal      bool      `msgpack:"terminal"`        // must be false
}

// PlanResponse is a confirmed plan. PlanHash is "sha256:" + 64 hex over
// the plan's canonical encoding; it is consumed by one mutation.
type PlanResponse struct {
	ContainerID string `msgpack:"container_id"` // the container the plan confirms (for create, the id the helper picked)
	ExpiresAt   int64  `msgpack:"expires_at"`   // Unix ms: now + PlanTTLMS
	Kind        string `msgpack:"kind"`         // the request's Kind
	PlanHash    string `msgpack:"plan_hash"`    // "sha256:" + 64 hex: MutationRequest.PlanHash
}

// MutationRequest carries out a plan: container.create, .start, .restart
// and .delete. ContainerID and Context must equal the plan's.
type MutationRequest struct {
	ContainerID string  `msgpack:"container_id"` // the plan's (PlanResponse.ContainerID); else plan.mismatch
	Context     Context `msgpack:"context"`      // the plan's; else plan.mismatch
	// PlanHash is PlanResponse.PlanHash: "" is plan.required, an unknown
	// or consumed plan plan.unknown, a late one plan.expired.
	PlanHash string `msgpack:"plan_hash"`
}

// DeleteResponse reports a deletion. It carries the tail of the
// container's console log (stdout and stderr), read after the container
// stopped (a forced delete's SIGTERM grace included) and before the log
// was removed with it, so a caller keeps what the container wrote while
// it stopped; container.logs can no longer read it once the delete is
// done. Adding these fields is wire-compatible: an older helper sends
// none of them (HasLogTail false).
type DeleteResponse struct {
	ContainerID string `msgpack:"container_id"` // the deleted container
	Deleted     bool   `msgpack:"deleted"`      // always true in an answer: the container, its bundle, console log and record are gone
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
//
// At least one is given (else request.invalid); an op matching either is
// cancelled.
type CancelRequest struct {
	Corr      string `msgpack:"corr"`       // the op's correlation id (rpc.WithCorr), at most 64 bytes; "" = match by RequestID
	RequestID []byte `msgpack:"request_id"` // the op's request id, exactly 16 bytes; empty = match by Corr
}

// CancelResponse counts the ops that were cancelled.
type CancelResponse struct {
	Cancelled int64 `msgpack:"cancelled"` // ops cancelled, at least 1 (none is op.not_found)
}

// Health is the helper's health answer: the common fields and its own.
//
// The provider fields (CapabilityDigest, Codec, HostKind, Provider,
// ProviderVersion) are absent while no runtime could be set up.
type Health struct {
	CapabilityDigest string `msgpack:"capability_digest"` // as NegotiateResponse.CapabilityDigest
	Codec            string `msgpack:"codec"`             // as NegotiateResponse.Codec
	Epoch            string `msgpack:"epoch"`             // 16 lowercase hex, new at every process start
	HostKind         string `msgpack:"host_kind"`         // as NegotiateResponse.HostKind
	IdleTimeoutMS    int64  `msgpack:"idle_timeout_ms"`   // 0 = never exits when idle
	InFlight         int64  `msgpack:"in_flight"`         // ops under way, this one included
	ProjectID        string `msgpack:"project_id"`        // as NegotiateResponse.ProjectID
	Provider         string `msgpack:"provider"`          // as NegotiateResponse.Provider
	ProviderVersion  string `msgpack:"provider_version"`  // the runtime's version (NegotiateResponse.Version)
	Status           string `msgpack:"status"`            // "ok"
	UptimeMS         int64  `msgpack:"uptime_ms"`         // milliseconds since the helper started
	Version          string `msgpack:"version"`           // the helper's own version
}
