package manager

import (
	"context"
	"time"

	"hostkit.dev/lib/rpc"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// holders is everything the manager asks of holder processes: to take an
// instance, to report, stop or signal it, and whether one still runs.
// The manager's decisions (intents, metadata, egress, reconcile) sit
// above it, so they can be tested with a fake holder side; procHolders
// is the real one (docs/supervisord.md, "The holder" and "Holder pool").
type holders interface {
	// start gives instance a to a holder: an idle one of the pool, else
	// one started now. Before the assignment is sent, record is called
	// with that holder's identity; its error ends start (the holder, which
	// never got the assignment, is ended). It returns the holder's Ready
	// message and, when a holder took the assignment, recorded, which the
	// caller must call: it waits until deadline for the holder to write
	// holder.json (or end). err is the holder's start, channel or timeout
	// (os.ErrDeadlineExceeded) failure; a holder that could not start the
	// agent says so in Ready.Error with a nil err.
	start(a holder.Assignment, record func(proc.Identity) error) (r holder.Ready, recorded func(deadline time.Time), err error)
	// alive reports whether instance id's holder runs.
	alive(id string) bool
	// status asks instance id's holder for its status, within
	// holderTimeout. Errors: the rpc client's (daemon.unavailable when no
	// holder listens).
	status(ctx context.Context, id string) (*holder.Status, error)
	// stop asks instance id's holder to stop the tree (SIGTERM, timeoutMS
	// milliseconds, then the kill) and returns once it answered, at most
	// timeoutMS + 20 s later. Errors: the rpc client's.
	stop(ctx context.Context, id string, timeoutMS int64) error
	// signal sends signal n (1..64) to instance id's tree. Errors: the
	// rpc client's and the holder's.
	signal(ctx context.Context, id string, n int64) error
	// running reports whether process h, a holder named in a provision
	// intent, still runs (pid, start time and boot id all match).
	running(h proc.Identity) bool
	// kill sends SIGKILL to process h, verified by identity.
	kill(h proc.Identity)
	// killOrphan ends md's agent when it outlived its holder (identity
	// verified, its process group too) and reports whether it signalled
	// anything.
	killOrphan(md *store.Metadata) bool
}

// procHolders is holders with real holder processes: they come from
// pool, and each serves its instance on the socket sock(id) names.
type procHolders struct {
	pool *holderPool
	sock func(id string) string
}

// client returns an rpc client for instance id's holder.
func (h procHolders) client(id string, timeout time.Duration) *rpc.Client {
	return rpc.NewClient(h.sock(id), timeout)
}

func (h procHolders) status(ctx context.Context, id string) (*holder.Status, error) {
	c := h.client(id, holderTimeout)
	defer c.Close()
	var s holder.Status
	return &s, c.Call(ctx, holder.OpStatus, nil, &s)
}

func (h procHolders) stop(ctx context.Context, id string, timeoutMS int64) error {
	c := h.client(id, time.Duration(timeoutMS)*time.Millisecond+20*time.Second)
	defer c.Close()
	return c.Call(ctx, holder.OpStop, &holder.StopRequest{TimeoutMS: timeoutMS}, &holder.Status{})
}

func (h procHolders) signal(ctx context.Context, id string, n int64) error {
	c := h.client(id, holderTimeout)
	defer c.Close()
	return c.Call(ctx, holder.OpSignal, &holder.SignalRequest{Signal: n}, nil)
}
