package codec

import (
	"time"
)

// State is one container as a runtime reports it (runtime-spec runtime.md
// "State"), after validation.
type State struct {
	ID string // the container id
	// Pid is the init's host pid: > 0 unless Status is "stopped" (then 0)
	// or "creating".
	Pid int
	// Status is one of creating, created, running, stopped, paused.
	Status  string
	Bundle  string    // the bundle directory's absolute path
	Created time.Time // when the runtime created the container (RFC 3339 in its output)
	// Annotations are nil when the document has none (and always nil in
	// a crun-1.8 list entry, which never carries them).
	Annotations map[string]string
}

// Stats is one resource sample.
type Stats struct {
	// ID is the container the sample is for (the event's id).
	ID string
	// CPUTotalNS is the cgroup's total CPU time in nanoseconds.
	CPUTotalNS uint64
	// MemoryBytes is the cgroup's current memory usage in bytes.
	MemoryBytes uint64
	// Pids is the number of tasks in the cgroup.
	Pids uint64
}

// Features says what a runtime version line can print.
type Features struct {
	// ListAnnotations reports whether `list --format json` entries carry
	// annotations (runc 1.1 yes, crun 1.8 no: read them from `state`).
	ListAnnotations bool
	// Events reports whether the runtime has `events --stats` (crun 1.8
	// has no events verb).
	Events bool
	// StoredConfig names the file, inside a container's state directory
	// under --root, where the runtime keeps the OCI config it created the
	// container from (crun 1.8: "config.json", the record `crun state`
	// reads its annotations from); "" when the codec does not decode one.
	StoredConfig string
	// StoredState names the file, inside a container's state directory
	// under --root, where the runtime keeps its own record of the
	// container (runc 1.1: "state.json", libcontainer's State, which
	// `runc state` and `runc list` read); "" when the codec does not
	// decode one (see Codec.StoredState).
	StoredState string
	// KillBeforeDelete reports whether deleting a container that is not
	// stopped is faster as `kill <id> 9`, a wait for the init to exit,
	// and a plain `delete`: runc 1.1's `delete --force` and its `delete`
	// of a created container (delete.go, killContainer) send SIGKILL and
	// then sleep 100 ms before they look again; crun 1.8's do not.
	KillBeforeDelete bool
}

// Codec decodes one runtime version line's output. Each method takes the
// raw stdout of one command and returns CodeDecode for anything outside
// that version's exact shape. Implementations are stateless and safe for
// concurrent use.
type Codec interface {
	// Line is the version line, e.g. "runc-1.1".
	Line() string
	// Runtime is "runc" or "crun".
	Runtime() string
	// Features says what this version line prints.
	Features() Features
	// State decodes `state <id>` (cap MaxState).
	State(b []byte) (State, error)
	// List decodes `list --format json` (cap MaxList); an empty root is a
	// non-nil empty slice. Entries keep the runtime's order.
	List(b []byte) ([]State, error)
	// Events decodes one `events --stats <id>` object (cap MaxEvents);
	// CodeIncompatible when Features().Events is false.
	Events(b []byte) (Stats, error)
	// Ps decodes `ps --format json` (cap MaxPs): the pids, in the
	// runtime's order; empty is a non-nil empty slice.
	Ps(b []byte) ([]int, error)
	// StoredAnnotations decodes the annotations of the config in
	// Features().StoredConfig (cap MaxState): nil when it has none;
	// CodeIncompatible when the codec has no stored config.
	StoredAnnotations(b []byte) (map[string]string, error)
	// StoredState decodes the runtime's own record in
	// Features().StoredState (cap MaxState); CodeIncompatible when the
	// codec has none.
	StoredState(b []byte) (Stored, error)
}

// Stored is what a runtime keeps about one container in its state
// directory, as far as hostkit reads it. It is not a State: the status
// is not recorded there, the caller derives it from the init process the
// way the runtime's own `state` does.
type Stored struct {
	ID string // the container id
	// InitPid is the init's host pid, InitStart its start time in clock
	// ticks since boot (proc(5) /proc/<pid>/stat field 22): together
	// they identify the process even after its pid is reused.
	InitPid   int
	InitStart uint64    // clock ticks since boot; see InitPid
	Created   time.Time // when the runtime created the container
	// Bundle and Annotations are what `state` prints ("" and nil when
	// the record has none).
	Bundle      string
	Annotations map[string]string // see Bundle
	// CgroupPaths maps a cgroup v1 controller ("freezer", ...), or "" for
	// the unified hierarchy, to the container's cgroup directory.
	CgroupPaths map[string]string
}

// statuses is the OCI status enumeration plus the runtimes' "paused".
var statuses = map[string]bool{"creating": true, "created": true, "running": true, "stopped": true, "paused": true}

// stateShape lists the keys of one state or list object beyond the five
// required ones (id, pid, status, bundle, created).
type stateShape struct {
	// strings are known optional string keys (ociVersion, rootfs, owner,
	// ...): type-checked, not returned.
	strings []string
	// annotations reports whether an "annotations" object may appear.
	annotations bool
}

// decodeState validates one state object v against shape.
func decodeState(what, path string, v any, shape stateShape) (State, error) {
	o, err := asObject(what, path, v)
	if err != nil {
		return State{}, err
	}
	var s State
	if s.ID, err = o.str("id", true); err != nil {
		return State{}, err
	}
	if s.ID == "" {
		return State{}, o.wrongType("id", "a non-empty string")
	}
	pid, err := o.uint("pid", true, maxPid)
	if err != nil {
		return State{}, err
	}
	s.Pid = int(pid)
	if s.Status, err = o.str("status", true); err != nil {
		return State{}, err
	}
	if !statuses[s.Status] {
		return State{}, decodeErr(what, "%s: unknown status", member(path, "status"))
	}
	switch s.Status {
	case "stopped":
		if s.Pid != 0 {
			return State{}, decodeErr(what, "%s: a stopped container with a pid", path)
		}
	case "created", "running", "paused":
		if s.Pid == 0 {
			return State{}, decodeErr(what, "%s: a %s container without a pid", path, s.Status)
		}
	}
	if s.Bundle, err = o.str("bundle", true); err != nil {
		return State{}, err
	}
	if s.Bundle == "" {
		return State{}, o.wrongType("bundle", "a non-empty string")
	}
	if s.Created, err = o.time("created"); err != nil {
		return State{}, err
	}
	if shape.annotations {
		if s.Annotations, err = o.stringMap("annotations"); err != nil {
			return State{}, err
		}
	}
	if err := o.allowStrings(shape.strings...); err != nil {
		return State{}, err
	}
	return s, o.rest()
}

// decodeList validates a list document: an array of state objects, or,
// when nullEmpty, the literal null for an empty list.
func decodeList(what string, b []byte, nullEmpty bool, shape stateShape) ([]State, error) {
	v, err := parse(what, b, MaxList)
	if err != nil {
		return nil, err
	}
	if v == nil {
		if !nullEmpty {
			return nil, decodeErr(what, "$: null, this runtime prints [] for an empty list")
		}
		return []State{}, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, decodeErr(what, "$: not an array")
	}
	if len(a) == 0 && nullEmpty {
		return nil, decodeErr(what, "$: [], this runtime prints null for an empty list")
	}
	out := make([]State, 0, len(a))
	seen := make(map[string]bool, len(a))
	for i, e := range a {
		s, err := decodeState(what, "$["+itoa(i)+"]", e, shape)
		if err != nil {
			return nil, err
		}
		if seen[s.ID] {
			return nil, decodeErr(what, "$[%d]: duplicate container id", i)
		}
		seen[s.ID] = true
		out = append(out, s)
	}
	return out, nil
}

// decodePs validates a ps document: an array of positive pids, or, when
// nullEmpty, the literal null for none.
func decodePs(what string, b []byte, nullEmpty bool) ([]int, error) {
	v, err := parse(what, b, MaxPs)
	if err != nil {
		return nil, err
	}
	if v == nil {
		if !nullEmpty {
			return nil, decodeErr(what, "$: null, this runtime prints an array")
		}
		return []int{}, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, decodeErr(what, "$: not an array")
	}
	if len(a) == 0 && nullEmpty {
		return nil, decodeErr(what, "$: [], this runtime prints null for no processes")
	}
	out := make([]int, 0, len(a))
	seen := make(map[int]bool, len(a))
	for i, e := range a {
		pid, ok := positiveInt(e, maxPid)
		if !ok {
			return nil, decodeErr(what, "$[%d]: not a pid", i)
		}
		if seen[pid] {
			return nil, decodeErr(what, "$[%d]: duplicate pid", i)
		}
		seen[pid] = true
		out = append(out, pid)
	}
	return out, nil
}
