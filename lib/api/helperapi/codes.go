package helperapi

// Error codes the helper returns in addition to lib/wire's and those of
// its internal packages (provider, capability, image, state), all listed
// in docs/protocol.md (append-only).
const (
	// CodeCapabilityMismatch: the request's capability digest is not the
	// current snapshot's (the runtime changed since the plan): negotiate
	// and plan again.
	CodeCapabilityMismatch = "capability.mismatch"
	// CodeContainerNotOwned: the container exists but its annotations do
	// not bind it to this project and instance; it is never touched.
	CodeContainerNotOwned = "container.not_owned"
	// CodeOpCancelled: op.cancel ended the op; its runtime command's
	// process group was killed. Observe before repeating it.
	CodeOpCancelled = "op.cancelled"
	// CodeOpNotFound: op.cancel found no op under way from this peer user
	// with that request id or correlation id.
	CodeOpNotFound = "op.not_found"
	// CodePlanMismatch: the plan exists but the mutation's op, container
	// id or context differs from the plan's.
	CodePlanMismatch = "plan.mismatch"
	// CodePlanRequired: a mutation without a plan hash.
	CodePlanRequired = "plan.required"
	// CodeProjectMismatch: the request's project id is not this helper's.
	CodeProjectMismatch = "project.mismatch"
)

// Codes lists the codes above, sorted and unique (a test checks).
var Codes = []string{
	CodeCapabilityMismatch,
	CodeContainerNotOwned,
	CodeOpCancelled,
	CodeOpNotFound,
	CodePlanMismatch,
	CodePlanRequired,
	CodeProjectMismatch,
}
