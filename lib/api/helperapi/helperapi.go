// Package helperapi is the containerization-helper's wire API (issue 8,
// DESIGN.md "The binaries"): op names, the client role, annotation keys,
// request and response bodies, error codes and a typed client. Struct
// fields are declared in bytewise order of their msgpack keys, as the
// canonical encoding requires (wire.CheckSchema tests it).
//
// Every mutation is plan-confirmed: container.plan answers a plan hash (the
// SHA-256 of the plan's canonical encoding) and container.create, .start,
// .restart and .delete act only on a plan hash they are given, with an
// idempotency key, after re-checking the container's identity, the
// capability digest, ownership (annotations) and the fence.
package helperapi

import "hostkit.dev/lib/rpc"

// Op names. Every op needs the client role, and the peer's executable
// must be on the helper's allowlist (DESIGN.md, "Sockets and peers").
const (
	OpNegotiate = "runtime.negotiate"
	OpObserve   = "runtime.observe"
	OpEvidence  = "image.evidence"
	OpUsage     = "container.usage"
	OpLogs      = "container.logs"
	OpPlan      = "container.plan"
	OpCreate    = "container.create"
	OpStart     = "container.start"
	OpRestart   = "container.restart"
	OpDelete    = "container.delete"
	OpCancel    = "op.cancel"
	OpHealth    = "health"
)

// MutatingOps are the ops that change runtime state: each needs an
// idempotency key (request.idempotency_required) and a plan hash.
var MutatingOps = []string{OpCreate, OpStart, OpRestart, OpDelete}

// RoleClient holds every helper op (DESIGN.md's role table: admins and
// supervisord's user).
const RoleClient rpc.Role = "client"

// Plan kinds: the mutation a plan confirms.
const (
	KindCreate  = "create"
	KindStart   = "start"
	KindRestart = "restart"
	KindDelete  = "delete"
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
	PhaseCreating  = "creating"
	PhaseCreated   = "created"
	PhaseStarting  = "starting"
	PhaseRunning   = "running"
	PhaseStopping  = "stopping" // a restart's stop step
	PhaseDeleting  = "deleting"
	PhaseUntracked = "untracked" // owned by annotations, but no record (e.g. the state was lost)
)

// Bounds.
const (
	// DefaultLogBytes is container.logs' tail size when MaxBytes is 0.
	DefaultLogBytes = 64 << 10
	// MaxLogBytes caps container.logs' tail (1 MiB).
	MaxLogBytes = 1 << 20
	// DefaultStopTimeoutMS is restart's (and a forced delete's) wait for a
	// stop after SIGTERM before SIGKILL.
	DefaultStopTimeoutMS = 10_000
	// MinStopTimeoutMS and MaxStopTimeoutMS bound StopTimeoutMS.
	MinStopTimeoutMS = 100
	MaxStopTimeoutMS = 300_000
	// MaxArgs and MaxEnv bound a create plan's command and environment
	// (entries); MaxArgBytes bounds their total size (bytes; a plan
	// record holds at most 64 KiB).
	MaxArgs     = 256
	MaxEnv      = 256
	MaxArgBytes = 32 << 10
	// PlanTTLMS is how long a plan may wait for its mutation.
	PlanTTLMS = 10 * 60 * 1000
)
