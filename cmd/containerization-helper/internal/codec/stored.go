package codec

import "strings"

// runcStoredKeys are the top-level keys of runc 1.1's state.json
// (libcontainer/container_linux.go, State and BaseState) besides the ones
// StoredState reads: type-checked, not returned.
var runcStoredKeys = struct{ bools, objects, arrays, strings []string }{
	bools:   []string{"rootless"},
	objects: []string{"namespace_paths"},
	arrays:  []string{"external_descriptors"},
	strings: []string{"intel_rdt_path"},
}

// StoredState decodes runc 1.1's <root>/<id>/state.json: "id",
// "init_process_pid", "init_process_start", "created" and
// "config"."labels" are required and read, "cgroup_paths" (an object of
// strings) is read when present; the other top-level keys runc 1.1 writes
// are type-checked and any other is refused. Inside "config" (the
// libcontainer configuration the container was made from) every key but
// "labels" is tolerated: its shape follows the runtime-spec document and
// none of it is semantic for hostkit. Labels are "key=value" strings,
// split at the first "=" as runc's utils.Annotations does: "bundle" is
// the bundle, every other key an annotation, a label without "=" is
// skipped. Duplicate keys anywhere are refused, as everywhere.
func (runc11) StoredState(b []byte) (Stored, error) {
	const what = "runc stored state"
	v, err := parse(what, b, MaxState)
	if err != nil {
		return Stored{}, err
	}
	o, err := asObject(what, "$", v)
	if err != nil {
		return Stored{}, err
	}
	var s Stored
	if s.ID, err = o.str("id", true); err != nil {
		return Stored{}, err
	}
	if s.ID == "" {
		return Stored{}, o.wrongType("id", "a non-empty string")
	}
	pid, err := o.uint("init_process_pid", true, maxPid)
	if err != nil {
		return Stored{}, err
	}
	s.InitPid = int(pid)
	if s.InitStart, err = o.uint("init_process_start", true, ^uint64(0)); err != nil {
		return Stored{}, err
	}
	if s.Created, err = o.time("created"); err != nil {
		return Stored{}, err
	}
	if s.CgroupPaths, err = o.stringMap("cgroup_paths"); err != nil {
		return Stored{}, err
	}
	cfg, err := o.obj("config", true)
	if err != nil {
		return Stored{}, err
	}
	labels, err := cfg.strList("labels")
	if err != nil {
		return Stored{}, err
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		switch {
		case !ok:
		case k == "bundle":
			s.Bundle = v
		default:
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[k] = v
		}
	}
	keys := runcStoredKeys
	if err := o.allowStrings(keys.strings...); err != nil {
		return Stored{}, err
	}
	for _, k := range keys.bools {
		if v, ok := o.get(k); ok {
			if _, isBool := v.(bool); !isBool {
				return Stored{}, o.wrongType(k, "a boolean")
			}
		}
	}
	for _, k := range keys.objects {
		if _, err := o.obj(k, false); err != nil {
			return Stored{}, err
		}
	}
	for _, k := range keys.arrays {
		if v, ok := o.get(k); ok && v != nil {
			if _, isArr := v.([]any); !isArr {
				return Stored{}, o.wrongType(k, "an array")
			}
		}
	}
	return s, o.rest()
}
