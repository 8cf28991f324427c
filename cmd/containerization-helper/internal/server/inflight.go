package server

import (
	"context"
	"errors"
	"sync"

	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// errCancelled is the cause an op's context carries after op.cancel.
var errCancelled = errors.New("cancelled by op.cancel")

// inflight tracks the ops under way, so op.cancel can end one: by (peer
// uid, request id) or (peer uid, correlation id). A peer user can cancel
// only its own ops.
type inflight struct {
	mu   sync.Mutex
	next uint64
	ops  map[uint64]*flight
}

type flight struct {
	uid    uint32
	id     string // request id bytes
	corr   string
	cancel context.CancelCauseFunc
}

func newInflight() *inflight { return &inflight{ops: map[uint64]*flight{}} }

func (f *inflight) add(fl *flight) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.ops[f.next] = fl
	return f.next
}

func (f *inflight) remove(k uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ops, k)
}

func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ops)
}

// cancelMatching cancels the ops of uid with that request id or corr and
// returns how many.
func (f *inflight) cancelMatching(uid uint32, id []byte, corr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, fl := range f.ops {
		if fl.uid != uid {
			continue
		}
		if (len(id) > 0 && fl.id == string(id)) || (corr != "" && fl.corr == corr) {
			fl.cancel(errCancelled)
			n++
		}
	}
	return n
}

// cancellable registers the call for op.cancel while h runs under a
// context that op.cancel can end; the runtime command it runs then has its
// process group killed (lib/procexec), and the op answers op.cancelled.
func (s *Server) cancellable(h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, call *rpc.Call) (any, error) {
		cctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		k := s.inflight.add(&flight{uid: call.Peer.UID, id: string(call.ID), corr: call.Corr, cancel: cancel})
		defer s.inflight.remove(k)
		v, err := h(cctx, call)
		if err != nil && errors.Is(context.Cause(cctx), errCancelled) {
			return nil, &wire.Error{Code: helperapi.CodeOpCancelled, Msg: "the op was cancelled by op.cancel", Retry: wire.RetryAfterObserve, Err: err}
		}
		return v, err
	}
}

// cancel is op.cancel. It needs a request id (16 bytes) or a correlation
// id; op.not_found when no op of this peer user matches. It runs outside
// the in-flight table, so it cannot cancel itself.
func (s *Server) cancel(ctx context.Context, call *rpc.Call, req *helperapi.CancelRequest) (*helperapi.CancelResponse, error) {
	n := s.inflight.cancelMatching(call.Peer.UID, req.RequestID, req.Corr)
	if n == 0 {
		return nil, wire.Errorf(helperapi.CodeOpNotFound, "no op under way matches")
	}
	return &helperapi.CancelResponse{Cancelled: int64(n)}, nil
}

// keyedMutex serializes mutations of one container id: a start and a
// delete of the same container never interleave.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	ch   chan struct{} // a one-slot semaphore
	refs int
}

// lock takes id's lock, or returns ctx's error; unlock releases it.
func (k *keyedMutex) lock(ctx context.Context, id string) (unlock func(), err error) {
	k.mu.Lock()
	e := k.m[id]
	if e == nil {
		e = &keyedEntry{ch: make(chan struct{}, 1)}
		k.m[id] = e
	}
	e.refs++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, id)
		}
		k.mu.Unlock()
	}
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
