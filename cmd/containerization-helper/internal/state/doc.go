// Package state is the containerization-helper's persistent state: one
// schema-versioned JSON document, state.json, in the helper's private state
// directory (docs/design.md, "Paths": /var/lib/hostkit/helper/ or
// R/state/helper/). It holds
//
//   - the project binding: a UUID (canonical lowercase 8-4-4-4-12, random
//     version 4) made at the first Open and never changed afterwards; the
//     helper's ownership annotations carry it;
//   - per-instance fences: a monotonically increasing generation per
//     instance id. An op carries the fence it was planned with; CheckFence
//     refuses it (CodeFenceStale) once the instance's fence has moved past;
//   - idempotency records: key → op, request hash, result, until they
//     expire (default 24 h). The same key and request get the stored
//     result; the same key with another op or request is
//     CodeIdemConflict. The caller scopes keys by peer UID and op
//     (docs/protocol.md, "Replay, idempotency and deadlines");
//   - plan records: plan hash → plan contents and expiry, kept in memory
//     only (state.json's "plans" is always empty). A mutation consumes its
//     plan once, in the same step (Apply) that makes its fence and
//     in-progress record durable; a plan never stored or already consumed
//     is CodePlanUnknown, one past its expiry CodePlanExpired (remembered
//     for a grace period, default 1 h, then unknown). A restart forgets
//     every plan: the caller plans again (plan.unknown says so), and no
//     plan, consumed or not, can come back after a crash. Keeping them in
//     memory saves one durable rewrite of state.json per plan;
//   - container records: container id → instance, bundle, console log,
//     fence, plan hash and phase, for crash recovery.
//
// Durability. Every mutation (but PutPlan and ConsumePlan, which touch
// memory only) is durable before it returns, and Apply makes several
// durable at once. The state at rest is state.json, written as a snapshot:
// a temporary file (0600) in the same directory, write, fsync, rename over
// state.json, fsync of the directory. Between two Opens, writes go to
// state.wal instead: two slots, each a header (magic, generation, length,
// CRC-32C) and the whole document; write g overwrites slot g%2 (which
// held g-2) and is made durable with one fdatasync, no rename and no
// directory fsync (on this machine's disk 0.5 ms against 2.5–4.5 ms for a
// snapshot). A torn slot fails its CRC and the other slot holds the
// previous, acknowledged write. The file is made (allocated to its full
// size, synced with its directory) at the first write after a snapshot;
// a document that outgrows its slots is written as a snapshot and the
// slots start over, larger. Open adopts the newest intact slot whose
// generation is above state.json's, writes it back as state.json and
// removes state.wal, so a crash at any point leaves the last acknowledged
// document and a crash after a method returned loses nothing. Open also
// removes leftover temporary files (a torn snapshot) and never replaces a
// state.json it cannot read (nor starts a new project next to a state.wal
// without one): that would change the project UUID and orphan every
// container. The directory is created 0700 and must be owned by this user
// with no group or other access; an flock on state.lock keeps a second
// helper out. After a failed write the Store refuses further mutations
// (CodeIO) until it is reopened, and its memory is rolled back to the last
// durable document. (Batch.DeferDirSync only matters for a snapshot.)
//
// Strict decoding. state.json must be exactly one JSON value; duplicate
// keys (compared as encoding/json matches names, case-insensitively) and
// object keys outside [a-z0-9_.:-] are refused, so no spelling can reach a
// field twice; unknown fields are refused; "schema" must be 1
// (CodeSchemaUnsupported otherwise, checked before the rest is decoded);
// every record is validated. Anything else is CodeCorrupt.
//
// Recovery. A container phase is written before the runtime is asked
// (creating, starting, stopping, deleting: "in progress") and the settled
// phase after it answered. Records still in progress when Open loads the
// file were left by a helper that stopped in between: the runtime may or
// may not have acted. Recovering lists them; the helper must re-observe
// the runtime for each and record what it saw with Reconcile (or
// DeleteContainer when the container is gone) before anything retries
// them: until then PutContainer refuses them with CodeRecovering. An
// idempotency record is written only with an op's final answer, so an op
// cut short by the crash has none and a retry runs it again, which is
// safe only because the record forces re-observation first; its plan is
// gone with the restart (the caller plans again).
//
// A Store is safe for concurrent use.
package state

// Error codes (stable `area.reason` strings, append-only; each is listed in
// docs/protocol.md, containerization-helper section).
const (
	// CodeClosed: the Store was closed.
	CodeClosed = "state.closed"
	// CodeCorrupt: state.json is not a strict JSON document of schema 1
	// (bad JSON, duplicate or unknown key, invalid record); it is left
	// untouched.
	CodeCorrupt = "state.corrupt"
	// CodeDirUnsafe: the state directory is a symlink, not a directory,
	// owned by another user, or open to group or others.
	CodeDirUnsafe = "state.dir_unsafe"
	// CodeFenceStale: the op's fence is below the instance's current
	// fence: the instance moved on since the op was planned.
	CodeFenceStale = "fence.stale"
	// CodeFull: a record cap (or the document size cap) is reached;
	// nothing was changed.
	CodeFull = "state.full"
	// CodeIdemConflict: the idempotency key was used before with another
	// op or request.
	CodeIdemConflict = "idempotency.conflict"
	// CodeInvalid: an argument is malformed (id, hash, phase, size).
	CodeInvalid = "state.invalid"
	// CodeIO: reading or durably writing the state failed; after a failed
	// write the Store refuses mutations until reopened.
	CodeIO = "state.io"
	// CodeLocked: another process holds the state directory's lock.
	CodeLocked = "state.locked"
	// CodeNotFound: no container record with that id.
	CodeNotFound = "state.not_found"
	// CodePlanExpired: the plan's expiry has passed.
	CodePlanExpired = "plan.expired"
	// CodePlanUnknown: no such plan: never stored, already consumed, or
	// expired long ago.
	CodePlanUnknown = "plan.unknown"
	// CodeRecovering: the container record was in progress when the
	// previous helper stopped; observe the runtime and Reconcile first.
	CodeRecovering = "state.recovering"
	// CodeSchemaUnsupported: state.json has a schema version this helper
	// does not read; it is left untouched.
	CodeSchemaUnsupported = "state.schema_unsupported"
)

// Codes lists every code above, sorted; a test keeps it sorted, unique and
// documented.
var Codes = []string{
	CodeFenceStale,
	CodeIdemConflict,
	CodePlanExpired,
	CodePlanUnknown,
	CodeClosed,
	CodeCorrupt,
	CodeDirUnsafe,
	CodeFull,
	CodeInvalid,
	CodeIO,
	CodeLocked,
	CodeNotFound,
	CodeRecovering,
	CodeSchemaUnsupported,
}
