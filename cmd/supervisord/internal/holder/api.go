// Package holder is the per-instance holder process (`supervisord holder`,
// the same binary re-executed): it starts the agent in its own session
// (on a PTY when asked), is its child subreaper and single reaper, drains
// its output into a ring buffer and the size-capped log, records the exit
// status, serves status, attach, signal and stop on its own socket, and on
// stop freezes and kills the whole process tree.
package holder

import (
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// Op names served on a holder socket (to supervisord's uid only).
const (
	OpStatus = "holder.status"
	OpStop   = "holder.stop"
	OpSignal = "holder.signal"
	OpAttach = "holder.attach"
)

// RingSize is the size of the output ring buffer replayed on attach.
const RingSize = 256 << 10

// Status is a holder's answer to status and stop.
type Status struct {
	AgentPID    int64           `msgpack:"agent_pid"`   // the agent leader's pid: the current one after an on-failure restart
	Descendants int64           `msgpack:"descendants"` // live processes of the tree, leader included
	Exit        *api.ExitStatus `msgpack:"exit"`        // how the tree ended; nil while it runs
	PGID        int64           `msgpack:"pgid"`        // the agent's process group id
	Restarts    int64           `msgpack:"restarts"`    // on-failure restarts made
	State       string          `msgpack:"state"`       // api.State*
}

// StopRequest asks the holder to stop the tree: SIGTERM (and SIGCONT) to
// the process group and every descendant, wait up to TimeoutMS for the tree
// to end, then freeze and kill what remains.
type StopRequest struct {
	TimeoutMS int64 `msgpack:"timeout_ms"` // ms to wait after SIGTERM, normally the instance's stop_timeout_ms
}

// SignalRequest sends Signal to the process group (while the leader runs)
// or to every descendant (after it exited).
type SignalRequest struct {
	Signal int64 `msgpack:"signal"` // the signal number, 1..64 (signal(7)); else signal.invalid
}

// Validate refuses a signal number outside Linux's 1..64
// (signal.invalid); 0, kill(2)'s existence probe, is no signal to send.
func (r *SignalRequest) Validate() error {
	if r.Signal <= 0 || r.Signal > 64 {
		return wire.Errorf(api.CodeSignalInvalid, "signal out of range")
	}
	return nil
}

// AttachRequest opens an attach stream; Rows and Cols (when not zero)
// resize the PTY first.
type AttachRequest struct {
	Cols uint16 `msgpack:"cols"` // columns; 0 = leave as is
	Rows uint16 `msgpack:"rows"` // lines; 0 = leave as is
}

// Empty is an empty body.
type Empty struct{}
