package credential

import "hostkit.dev/lib/api/secretdapi"

// JSONTarget is a target as the on-disk formats spell it (the store's
// metadata line and the $CREDENTIALS_DIRECTORY metadata file).
type JSONTarget struct {
	Target    string `json:"target"`               // secretdapi.TargetSpec.Target
	Template  string `json:"template,omitempty"`   // header targets: the value with `{}` once; absent = "{}"
	Overwrite bool   `json:"overwrite,omitempty"`  // header targets: replace a header the agent sent
	BasicUser string `json:"basic_user,omitempty"` // basic:password only: the fixed user-id (at most 256 bytes)
}

// ToJSONTargets converts API targets to their file form.
func ToJSONTargets(ts []secretdapi.TargetSpec) []JSONTarget {
	out := make([]JSONTarget, len(ts))
	for i, t := range ts {
		out[i] = JSONTarget{Target: t.Target, Template: t.Template, Overwrite: t.Overwrite, BasicUser: t.BasicUser}
	}
	return out
}

// FromJSONTargets converts file targets to API targets (not yet validated).
func FromJSONTargets(ts []JSONTarget) []secretdapi.TargetSpec {
	out := make([]secretdapi.TargetSpec, len(ts))
	for i, t := range ts {
		out[i] = secretdapi.TargetSpec{Target: t.Target, Template: t.Template, Overwrite: t.Overwrite, BasicUser: t.BasicUser}
	}
	return out
}
