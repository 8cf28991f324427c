// Package fault holds supervisord's pause points: named step boundaries
// of multi-step operations (provision, stop, destroy) where a test built
// with the build tag faultinject can stop supervisord, kill it (kill -9)
// and check what a restart makes of the half-done operation
// (docs/supervisord.md, "Restart"). Without the tag, Point is an empty
// function the compiler removes: release binaries carry no pause point,
// which a test of cmd/supervisord checks on the built binary.
package fault

// Names of the pause points, in the order an operation reaches them.
// Tests kill supervisord at each.
const (
	ProvisionIntent   = "provision.intent"   // the provision intent is durable; nothing staged yet
	ProvisionLease    = "provision.lease"    // one lease staged (reached once per credential)
	ProvisionBundle   = "provision.bundle"   // the bundle registered
	ProvisionRecord   = "provision.record"   // agent.env and metadata.json written, holder recorded; not yet assigned
	ProvisionAssigned = "provision.assigned" // the holder was given the instance
	ProvisionRunning  = "provision.running"  // the agent runs and its record is durable; not yet answered
	ContainerPending  = "container.pending"  // a helper mutation is recorded as pending; not yet sent
	ContainerDone     = "container.done"     // a helper mutation's answer is recorded
	StopIntent        = "stop.intent"        // the stop intent is durable; nothing stopped yet
	StopStopped       = "stop.stopped"       // the tree is gone; the bundle not yet dropped
	StopDropped       = "stop.dropped"       // the bundle dropped, leases revoked; the state not yet written
	DestroyIntent     = "destroy.intent"     // the destroy intent is durable; nothing stopped yet
	DestroyReleased   = "destroy.released"   // the tree is gone and the egress released; the directory still there
	DestroyTrashed    = "destroy.trashed"    // the directory renamed to the trash; not yet deleted
)

// Points lists every pause point.
var Points = []string{
	ProvisionIntent, ProvisionLease, ProvisionBundle, ProvisionRecord, ProvisionAssigned, ProvisionRunning,
	ContainerPending, ContainerDone, StopIntent, StopStopped, StopDropped, DestroyIntent, DestroyReleased, DestroyTrashed,
}
