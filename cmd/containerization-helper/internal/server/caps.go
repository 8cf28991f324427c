package server

import "hostkit.dev/lib/api/helperapi"

// Capability names (package capability's catalog) the mutations need.
const (
	CapCreate  = "lifecycle.create"
	CapStart   = "lifecycle.start"
	CapKill    = "lifecycle.kill"
	CapDelete  = "lifecycle.delete"
	CapProcess = "process" // args, cwd and environment are applied
	CapState   = "state"   // state reports the spec's fields (every re-check reads it)
)

// capsFor lists the capabilities a plan kind needs from the provider's
// snapshot; a snapshot without one refuses the plan and the mutation
// before anything runs (capability.unavailable).
func capsFor(kind string) []string {
	switch kind {
	case helperapi.KindCreate:
		return []string{CapCreate, CapProcess, CapState}
	case helperapi.KindStart:
		return []string{CapStart, CapState}
	case helperapi.KindRestart:
		return []string{CapKill, CapDelete, CapCreate, CapStart, CapProcess, CapState}
	case helperapi.KindDelete:
		return []string{CapDelete, CapKill, CapState}
	}
	return nil
}
