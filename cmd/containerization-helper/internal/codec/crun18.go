package codec

import "hostkit.dev/lib/wire"

// crun18 is the codec for crun 1.8.x. crun writes its documents with
// yajl from fixed code (src/state.c, src/list.c, src/ps.c), so every shape
// is exact and no unknown key is tolerated anywhere, except in the stored
// OCI config (StoredAnnotations), where only "ociVersion" and
// "annotations" are read and the rest of the config (process, root,
// mounts, linux, ...) is tolerated: it is the runtime-spec's document, not
// crun's, and not semantic for ownership. crun 1.8 has no `events` verb.
type crun18 struct{}

// crunState is what `crun state` prints: ociVersion, id, pid, status,
// bundle, rootfs, created, systemd-scope, owner, and annotations when the
// config has any.
var crunState = stateShape{strings: []string{"ociVersion", "rootfs", "systemd-scope", "owner"}, annotations: true}

// crunListEntry is one `crun list --format json` entry: id, pid, status,
// bundle, created, owner; never annotations.
var crunListEntry = stateShape{strings: []string{"owner"}}

func (crun18) Line() string       { return "crun-1.8" }
func (crun18) Runtime() string    { return "crun" }
func (crun18) Features() Features { return Features{StoredConfig: "config.json"} }

// State decodes `crun state <id>`.
func (crun18) State(b []byte) (State, error) {
	v, err := parse("crun state", b, MaxState)
	if err != nil {
		return State{}, err
	}
	return decodeState("crun state", "$", v, crunState)
}

// List decodes `crun list --format json`: a JSON array (possibly empty,
// printed as "[\n\n]"); null is refused.
func (crun18) List(b []byte) ([]State, error) {
	return decodeList("crun list", b, false, crunListEntry)
}

// Ps decodes `crun ps --format json <id>`: a JSON array of pids; null is
// refused.
func (crun18) Ps(b []byte) ([]int, error) { return decodePs("crun ps", b, false) }

// Events always fails: crun 1.8 has no events verb (CodeIncompatible).
func (crun18) Events([]byte) (Stats, error) {
	return Stats{}, wire.Errorf(CodeIncompatible, "crun 1.8 has no events verb")
}

// StoredState always fails: crun 1.8's status file is not decoded; its
// state is read with `crun state` (CodeIncompatible).
func (crun18) StoredState([]byte) (Stored, error) {
	return Stored{}, wire.Errorf(CodeIncompatible, "crun 1.8: no stored state is decoded")
}

// StoredAnnotations decodes <root>/<id>/config.json, the copy of the
// bundle's config crun 1.8 keeps at create and reads `state`'s annotations
// from: an object with a string "ociVersion" and optional "annotations"
// (an object of strings). Duplicate keys anywhere are refused like
// everywhere else.
func (crun18) StoredAnnotations(b []byte) (map[string]string, error) {
	const what = "crun stored config"
	v, err := parse(what, b, MaxState)
	if err != nil {
		return nil, err
	}
	o, err := asObject(what, "$", v)
	if err != nil {
		return nil, err
	}
	if _, err := o.str("ociVersion", true); err != nil {
		return nil, err
	}
	return o.stringMap("annotations")
}
