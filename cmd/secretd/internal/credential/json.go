package credential

import "hostkit.dev/lib/api/secretdapi"

// JSONTarget is a target as the on-disk formats spell it (the store's
// metadata line and the $CREDENTIALS_DIRECTORY metadata file).
type JSONTarget struct {
	Target    string `json:"target"`
	Template  string `json:"template,omitempty"`
	Overwrite bool   `json:"overwrite,omitempty"`
	BasicUser string `json:"basic_user,omitempty"`
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
