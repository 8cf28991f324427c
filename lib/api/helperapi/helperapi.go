// Package helperapi is the containerization-helper's wire API
// (docs/containerization-helper.md, "Ops"): op names, the client role,
// annotation keys, request and response bodies, error codes and a typed
// client. Struct fields are declared in bytewise order of their msgpack
// keys, as the canonical encoding requires (wire.CheckSchema tests it).
// Times are int64 Unix milliseconds, digests "sha256:" + 64 lowercase hex,
// and a zero field is absent on the wire (docs/protocol.md, "Canonical
// encoding").
//
// Every mutation is plan-confirmed: container.plan answers a plan hash (the
// SHA-256 of the plan's canonical encoding) and container.create, .start,
// .restart and .delete act only on a plan hash they are given, with an
// idempotency key, after re-checking the container's identity, the
// capability digest, ownership (annotations) and the fence.
package helperapi

import "hostkit.dev/lib/rpc"

// Op names. Every op needs the client role, and the peer's executable
// must be on the helper's allowlist (docs/containerization-helper.md,
// "Authentication").
const (
	// OpNegotiate reports the active provider and its capability
	// snapshot: NegotiateRequest → NegotiateResponse.
	OpNegotiate = "runtime.negotiate"
	// OpObserve lists the containers in the helper's runtime root: empty
	// → ObserveResponse.
	OpObserve = "runtime.observe"
	// OpEvidence verifies an image layout's manifest and every blob it
	// names: ImageRef (ManifestDigest optional when the index lists one
	// manifest) → Evidence.
	OpEvidence = "image.evidence"
	// OpUsage samples an owned container's resource usage: IDRequest →
	// Usage.
	OpUsage = "container.usage"
	// OpLogs reads the tail of an owned container's console log:
	// LogsRequest → LogsResponse.
	OpLogs = "container.logs"
	// OpPlan confirms a mutation and stores it for PlanTTLMS:
	// PlanRequest → PlanResponse.
	OpPlan = "container.plan"
	// OpCreate carries out a create plan (idempotency key required):
	// MutationRequest → Container, status created.
	OpCreate = "container.create"
	// OpStart carries out a start plan (idempotency key required):
	// MutationRequest → Container, status running.
	OpStart = "container.start"
	// OpRestart carries out a restart plan: stop, delete, create from the
	// same bundle, start (idempotency key required): MutationRequest →
	// Container.
	OpRestart = "container.restart"
	// OpDelete carries out a delete plan (idempotency key required):
	// MutationRequest → DeleteResponse.
	OpDelete = "container.delete"
	// OpCancel cancels an op of the same peer user under way:
	// CancelRequest → CancelResponse.
	OpCancel = "op.cancel"
	// OpHealth is the common health op with the helper's fields: empty →
	// Health.
	OpHealth = "health"
)

// MutatingOps are the ops that change runtime state: each needs an
// idempotency key (request.idempotency_required) and a plan hash.
var MutatingOps = []string{OpCreate, OpStart, OpRestart, OpDelete}

// RoleClient holds every helper op: the helper's own user and those of
// -client-users, i.e. admins and supervisord's user
// (docs/containerization-helper.md, "Authentication").
const RoleClient rpc.Role = "client"

// Plan kinds: the mutation a plan confirms (PlanRequest.Kind). Any other
// kind is request.invalid.
const (
	KindCreate  = "create"  // container.create: needs Image and Command; the helper picks the id
	KindStart   = "start"   // container.start of a created container
	KindRestart = "restart" // container.restart: stop, delete, create from the same bundle, start
	KindDelete  = "delete"  // container.delete; with Force a running container is stopped first
)

// MutationKinds are the plan kinds, in lifecycle order.
var MutationKinds = []string{KindCreate, KindStart, KindRestart, KindDelete}

// Annotation keys the helper writes into every container it creates
// (config.json "annotations", OCI runtime-spec config.md). A container is
// owned by this helper only when AnnotationProject equals the helper's
// project id; a name (the container id) never grants ownership.
const (
	AnnotationProject  = "dev.hostkit.project"  // the project UUID (state)
	AnnotationInstance = "dev.hostkit.instance" // the instance id of the mutation context
	AnnotationFence    = "dev.hostkit.fence"    // the fence generation, decimal
	AnnotationPlan     = "dev.hostkit.plan"     // the create plan's hash
)

// ContainerIDPrefix starts every container id the helper generates:
// "hk-" + 16 lowercase hex digits from crypto/rand.
const ContainerIDPrefix = "hk-"

// Container phases in the helper's records (crash recovery): the phase is
// written before the runtime is asked, so a crash leaves the intent.
const (
	PhaseCreating  = "creating"  // a create is under way (or was, when the helper stopped)
	PhaseCreated   = "created"   // created, not started
	PhaseStarting  = "starting"  // a start is under way (or was)
	PhaseRunning   = "running"   // started
	PhaseStopping  = "stopping"  // a restart's stop step
	PhaseDeleting  = "deleting"  // a delete is under way (or was)
	PhaseUntracked = "untracked" // owned by annotations, but no record (e.g. the state was lost)
)

// Bounds.
const (
	// DefaultLogBytes is container.logs' tail size in bytes (64 KiB)
	// when LogsRequest.MaxBytes is 0.
	DefaultLogBytes = 64 << 10
	// MaxLogBytes caps container.logs' tail and a delete's log tail, in
	// bytes (1 MiB).
	MaxLogBytes = 1 << 20
	// DefaultStopTimeoutMS is restart's (and a forced delete's) wait for a
	// stop after SIGTERM before SIGKILL, in milliseconds (10 s), when
	// PlanRequest.StopTimeoutMS is 0.
	DefaultStopTimeoutMS = 10_000
	// MinStopTimeoutMS and MaxStopTimeoutMS bound
	// PlanRequest.StopTimeoutMS when it is not 0 (else request.invalid):
	// 100 ms to 5 minutes.
	MinStopTimeoutMS = 100
	MaxStopTimeoutMS = 300_000 // 5 minutes
	// MaxArgs and MaxEnv bound a create plan's command and environment
	// (entries); MaxArgBytes bounds their total size (bytes; a plan
	// record holds at most 64 KiB).
	MaxArgs     = 256      // Command entries at most (at least 1)
	MaxEnv      = 256      // Env entries at most
	MaxArgBytes = 32 << 10 // bytes of Command and Env together (32 KiB)
	// PlanTTLMS is how long a plan may wait for its mutation, in
	// milliseconds (10 minutes); later it is plan.expired.
	PlanTTLMS = 10 * 60 * 1000
)
