// Package provider drives one OCI runtime CLI (runc or crun) through
// lib/procexec: exact argv, helper-private --root, --log with
// --log-format json, helper-generated ids, strict decoding of everything
// the runtime prints (package codec). It is the only code in hostkit that
// builds a runtime command line.
//
// Every command line is `<bin> --root <root> --log <fresh file> --log-format
// json <verb> ...`, and the procexec policy New builds allows exactly those
// shapes (the verbs below, kill with seven signals by number, events only
// for runc); anything else is procexec.unknown before it runs.
//
// Create hands the container's append-only console log to the runtime as
// its stdout and stderr (procexec's caller-supplied output files), so the
// container inherits that file: never a pipe (`runc create` with pipe
// stdio never returns while the container lives) and never procexec's
// unnamed temporary files. runc's and crun's container init calls
// setsid(2), so procexec's kill of the runtime's process group when the
// runtime exits does not reach the container (TestContract's
// pipe_hang_guard checks both). crun 1.8 on a hybrid cgroup host runs
// inside `unshare --mount --propagation private -- /bin/sh -c
// scriptNoCgroupV2`, a constant script that unmounts the cgroup2 mount in
// that private namespace first (every verb but state and list, which only
// read the root).
//
// State and List read runc 1.1's own records (<root>/<id>/state.json,
// decoded strictly by the codec) and derive the status as `runc state`
// does, running nothing, and run the runtime whenever that is not certain
// (stored_linux.go). Delete stops a runc container with `kill <id> 9` and
// a wait for its init before a plain `delete`: runc 1.1's forced delete
// sleeps 100 ms.
//
// Failures are classified by re-reading state, since every runtime error
// exits 1; the runtime's last --log message, redacted, is quoted. Delete
// reaps the container's init when this process adopted it as a child
// subreaper. crun 1.8 has no events verb: its Stats reads the init's
// cgroup counters. crun's list has no annotations: they come from the
// runtime's stored config (see List).
//
// References: the OCI runtime spec's lifecycle and state
// (github.com/opencontainers/runtime-spec, runtime.md), runc(8) and
// crun(1), containerd's go-runc (argv building, files not pipes).
package provider

import (
	"context"
	"syscall"
	"time"

	"hostkit.dev/cmd/containerization-helper/internal/codec"
)

// Error codes (stable, append-only; listed in docs/protocol.md).
const (
	// CodeUnavailable: the runtime binary is missing, unsafe, or cannot
	// run on this host (e.g. crun on a hybrid cgroup host without the
	// private-mount-namespace wrapper); Reason says why.
	CodeUnavailable = "provider.unavailable"
	// CodeIncompatible: the runtime's version has no exact codec; never
	// a guess. Defined by package codec, which produces it.
	CodeIncompatible = codec.CodeIncompatible
	// CodeDecode: the runtime printed something its codec refuses
	// (oversize, duplicate key, unknown enum, partial document). Defined
	// by package codec, which produces it.
	CodeDecode = codec.CodeDecode
	// CodeFailed: the runtime failed, and re-reading state did not
	// classify the failure more precisely.
	CodeFailed = "provider.failed"
	// CodeInvalidID: a container id outside [a-z0-9][a-z0-9_.-]{0,63}
	// or containing "..": refused before anything runs.
	CodeInvalidID = "container.invalid_id"
	// CodeNotFound: the runtime has no container with that id.
	CodeNotFound = "container.not_found"
	// CodeExists: create of an id that already exists.
	CodeExists = "container.exists"
	// CodeBadState: the container is in the wrong state for the verb
	// (start of a running container, delete of a running one without
	// force).
	CodeBadState = "container.bad_state"
	// CodeConfigInvalid: New was given an unknown runtime name or a
	// malformed Config (relative or nested directories).
	CodeConfigInvalid = "provider.config_invalid"
	// CodeInvalidArgument: a CreateSpec path that is not absolute and
	// clean, a console log that is not a regular file, or a signal the
	// provider does not send; refused before anything runs.
	CodeInvalidArgument = "container.invalid_argument"
)

// Codes lists every code above in sorted order; a test keeps it sorted,
// unique and listed in docs/protocol.md.
var Codes = []string{
	CodeBadState,
	CodeExists,
	CodeInvalidArgument,
	CodeInvalidID,
	CodeNotFound,
	CodeConfigInvalid,
	CodeDecode,
	CodeFailed,
	CodeIncompatible,
	CodeUnavailable,
}

// Host kinds (Info.HostKind), from the cgroup mounts under /sys/fs/cgroup
// in /proc/self/mountinfo.
const (
	// HostCgroupV1: only cgroup v1 hierarchies.
	HostCgroupV1 = "cgroup-v1"
	// HostCgroupHybrid: v1 hierarchies plus a cgroup2 mount (usually
	// /sys/fs/cgroup/unified); crun 1.8 refuses such a host unless it
	// runs in a mount namespace without the cgroup2 mount.
	HostCgroupHybrid = "cgroup-hybrid"
	// HostCgroupV2: the unified hierarchy mounted at /sys/fs/cgroup.
	HostCgroupV2 = "cgroup-v2"
)

// Status is an OCI runtime status (runtime-spec runtime.md "State").
type Status string

// The OCI statuses. A codec rejects any other value.
const (
	StatusCreating Status = "creating"
	StatusCreated  Status = "created"
	StatusRunning  Status = "running"
	StatusStopped  Status = "stopped"
	// StatusPaused is runc's and crun's extension.
	StatusPaused Status = "paused"
)

// Info describes a negotiated provider.
type Info struct {
	Name     string // "runc" or "crun"
	Path     string // resolved absolute path of the runtime binary
	Version  string // e.g. "1.1.5"
	Codec    string // exact codec line, e.g. "runc-1.1", "crun-1.8"
	HostKind string // "cgroup-v1", "cgroup-hybrid" or "cgroup-v2"
	Wrapped  bool   // runs inside the private-mount-namespace wrapper
	Root     string // the helper-private --root
}

// State is one container as the runtime reports it.
type State struct {
	ID          string            // the container id
	Pid         int               // the init's host pid; 0 when stopped
	Status      Status            // the OCI status (runtime-spec runtime.md "State"), or paused
	Bundle      string            // the bundle directory's absolute path
	Created     time.Time         // when the runtime created the container
	Annotations map[string]string // from state, or from the bundle's config.json where the runtime's list omits them
}

// Stats is a container's resource usage (`events --stats`, one sample).
type Stats struct {
	CPUTotalNS  uint64 // CPU time the container's cgroup has used, nanoseconds
	MemoryBytes uint64 // memory the cgroup uses now, bytes
	Pids        uint64 // tasks in the cgroup now
}

// CreateSpec is what `create` needs. The bundle is helper-owned; ConsoleLog
// is an append-only file that receives the container's stdout and stderr
// (files, never pipes: `runc create` with pipe stdio never reaches EOF
// while the container lives).
type CreateSpec struct {
	ID         string // the container id to create (checked first: CodeInvalidID)
	Bundle     string // absolute path to an OCI bundle (config.json + rootfs)
	ConsoleLog string // absolute path; created 0600 if missing
}

// RuntimeProvider is one OCI runtime. Every method validates the id first
// (CodeInvalidID), runs at most a bounded number of runtime commands
// through the process runner, and returns *wire.Error with the codes
// above or procexec's. Every runtime error exits 1, so a failure is
// classified by re-reading state (e.g. create of an existing id is
// CodeExists, a verb on a missing id CodeNotFound).
type RuntimeProvider interface {
	// Negotiate runs `<bin> --version`, picks the exact codec and checks
	// the host; CodeUnavailable or CodeIncompatible otherwise.
	Negotiate(ctx context.Context) (Info, error)
	Create(ctx context.Context, spec CreateSpec) error
	Start(ctx context.Context, id string) error
	// Kill sends sig to the container's init (all: every process).
	Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error
	// Delete removes a stopped or created container; force also kills a
	// running one.
	Delete(ctx context.Context, id string, force bool) error
	State(ctx context.Context, id string) (*State, error)
	// List returns every container under the provider's root, sorted by
	// id; an empty root is an empty slice (runc prints null, crun []).
	List(ctx context.Context) ([]State, error)
	// Stats reads one sample (`events --stats`, never the endless
	// stream).
	Stats(ctx context.Context, id string) (*Stats, error)
	// Ps lists the container's host pids.
	Ps(ctx context.Context, id string) ([]int, error)
}
