package codec

import "hostkit.dev/lib/wire"

// runc11 is the codec for runc 1.1.x. Its documents come from fixed Go
// structs (containerState in state.go and list.go, types.Event in
// events.go), so the state and list shapes are exact: a key outside the
// struct is refused. Tolerated: any key inside an event's `data` other than
// the three subtrees read here (cpu, memory, pids) and, inside those, keys
// other than the counters read (their set varies with the kernel and the
// cgroup version, and none of them is semantic for hostkit); they are still
// checked for syntax and duplicate keys.
type runc11 struct{}

// runcState is containerState of runc 1.1 (state.go, list.go): ociVersion,
// id, pid, status, bundle, rootfs, created, annotations (omitempty), owner.
var runcState = stateShape{strings: []string{"ociVersion", "rootfs", "owner"}, annotations: true}

func (runc11) Line() string    { return "runc-1.1" }
func (runc11) Runtime() string { return "runc" }
func (runc11) Features() Features {
	return Features{ListAnnotations: true, Events: true, StoredState: "state.json", KillBeforeDelete: true}
}

// StoredAnnotations always fails: runc's list carries annotations, so the
// codec reads no stored config (CodeIncompatible).
func (runc11) StoredAnnotations([]byte) (map[string]string, error) {
	return nil, wire.Errorf(CodeIncompatible, "runc 1.1: no stored config is decoded")
}

// State decodes `runc state <id>` (indented JSON of containerState).
func (runc11) State(b []byte) (State, error) {
	v, err := parse("runc state", b, MaxState)
	if err != nil {
		return State{}, err
	}
	return decodeState("runc state", "$", v, runcState)
}

// List decodes `runc list --format json`: a JSON array of containerState,
// or null for an empty root (runc encodes a nil slice); [] is refused.
func (runc11) List(b []byte) ([]State, error) {
	return decodeList("runc list", b, true, runcState)
}

// Ps decodes `runc ps --format json <id>`: a JSON array of pids, or null
// when the container has no process (a nil slice); [] is refused.
func (runc11) Ps(b []byte) ([]int, error) { return decodePs("runc ps", b, true) }

// Events decodes one `runc events --stats <id>` line: {"type":"stats",
// "id":..., "data":{...}} (types.Event with types.Stats). The counters are
// omitempty in runc, so an absent one is 0; the cpu, memory and pids
// objects are not omitempty and must be present.
func (runc11) Events(b []byte) (Stats, error) {
	const what = "runc events"
	v, err := parse(what, b, MaxEvents)
	if err != nil {
		return Stats{}, err
	}
	ev, err := asObject(what, "$", v)
	if err != nil {
		return Stats{}, err
	}
	typ, err := ev.str("type", true)
	if err != nil {
		return Stats{}, err
	}
	if typ != "stats" {
		return Stats{}, decodeErr(what, "$[\"type\"]: not \"stats\"")
	}
	var st Stats
	if st.ID, err = ev.str("id", true); err != nil {
		return Stats{}, err
	}
	if st.ID == "" {
		return Stats{}, ev.wrongType("id", "a non-empty string")
	}
	data, err := ev.obj("data", true)
	if err != nil {
		return Stats{}, err
	}
	if err := ev.rest(); err != nil {
		return Stats{}, err
	}
	const max = ^uint64(0)
	cpu, err := data.obj("cpu", true)
	if err != nil {
		return Stats{}, err
	}
	usage, err := cpu.obj("usage", false)
	if err != nil {
		return Stats{}, err
	}
	if usage != nil {
		if st.CPUTotalNS, err = usage.uint("total", false, max); err != nil {
			return Stats{}, err
		}
	}
	mem, err := data.obj("memory", true)
	if err != nil {
		return Stats{}, err
	}
	musage, err := mem.obj("usage", false)
	if err != nil {
		return Stats{}, err
	}
	if musage != nil {
		if st.MemoryBytes, err = musage.uint("usage", false, max); err != nil {
			return Stats{}, err
		}
	}
	pids, err := data.obj("pids", true)
	if err != nil {
		return Stats{}, err
	}
	if st.Pids, err = pids.uint("current", false, max); err != nil {
		return Stats{}, err
	}
	return st, nil
}
