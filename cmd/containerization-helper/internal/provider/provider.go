// Package provider drives one OCI runtime CLI (runc or crun) through
// lib/procexec: exact argv, helper-private --root, --log with
// --log-format json, helper-generated ids, strict decoding of everything
// the runtime prints (package codec). It is the only code in hostkit that
// builds a runtime command line.
//
// References: the OCI runtime spec's lifecycle and state
// (github.com/opencontainers/runtime-spec, runtime.md), runc(8) and
// crun(1), containerd's go-runc (argv building, files not pipes).
package provider

import (
	"context"
	"syscall"
	"time"
)

// Error codes (stable, append-only; listed in docs/protocol.md).
const (
	// CodeUnavailable: the runtime binary is missing, unsafe, or cannot
	// run on this host (e.g. crun on a hybrid cgroup host without the
	// private-mount-namespace wrapper); Reason says why.
	CodeUnavailable = "provider.unavailable"
	// CodeIncompatible: the runtime's version has no exact codec; never
	// a guess.
	CodeIncompatible = "provider.incompatible"
	// CodeDecode: the runtime printed something its codec refuses
	// (oversize, duplicate key, unknown enum, partial document).
	CodeDecode = "provider.decode"
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
	ID          string
	Pid         int // 0 when stopped
	Status      Status
	Bundle      string
	Created     time.Time
	Annotations map[string]string // from state, or from the bundle's config.json where the runtime's list omits them
}

// Stats is a container's resource usage (`events --stats`, one sample).
type Stats struct {
	CPUTotalNS  uint64
	MemoryBytes uint64
	Pids        uint64
}

// CreateSpec is what `create` needs. The bundle is helper-owned; ConsoleLog
// is an append-only file that receives the container's stdout and stderr
// (files, never pipes: `runc create` with pipe stdio never reaches EOF
// while the container lives).
type CreateSpec struct {
	ID         string
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
