package state

import (
	"time"

	"hostkit.dev/lib/wire"
)

// Batch is several changes that become durable together, in one atomic
// rewrite of state.json (one fsync of the file and one of the directory,
// where the methods one by one would cost one pair each). A mutation
// needs two: before the runtime is asked, its fence, its plan and its
// in-progress phase (Fence, ConsumePlan, Put); after the runtime
// answered, its settled phase or removed record and its idempotency
// record (Put or Delete, Idem). Zero fields change nothing.
type Batch struct {
	// Fence raises an instance's fence as RaiseFence does.
	Fence *Fence
	// ConsumePlan consumes the plan with this hash as ConsumePlan does,
	// once the other changes are durable; Apply returns it.
	ConsumePlan string
	// Put writes a container record as PutContainer does.
	Put *Container
	// Delete removes a container record as DeleteContainer does.
	Delete string
	// Idem stores an idempotency record as PutIdem does.
	Idem *Idem
	// DeferDirSync lets a write that has to be a snapshot (the first
	// after Open, or one that outgrew the write-ahead slots) skip the
	// directory fsync after its rename: the new document's bytes are
	// durable and the rename atomic, but a power loss before the next
	// durable write may bring back the previous document. (A slot write
	// needs no directory fsync at all.) For the write a mutation makes
	// before it acts, whose loss only matters for an op never acknowledged
	// and whose containers a power loss ended anyway; never for a write
	// that precedes an answer.
	DeferDirSync bool
}

// Fence is one instance's fence generation.
type Fence struct {
	Instance string // the instance's canonical UUID
	N        uint64 // the generation to record (≥ 1); below the recorded one is CodeFenceStale
}

// Idem is one idempotency record (see PutIdem).
type Idem struct {
	Key, Op, RequestHash string // as PutIdem's arguments
	Result               []byte // the stored answer, at most 64 KiB
}

// Apply makes every change of b, in the order of its fields, durable at
// once: all of them or none (a failing step leaves the state as it was).
// It returns the consumed plan when b consumes one. Errors: those of the
// methods each field stands for (CodeFenceStale, CodePlanUnknown,
// CodePlanExpired, CodeRecovering, CodeIdemConflict, CodeInvalid,
// CodeFull), CodeIO, CodeClosed.
func (s *Store) Apply(b Batch) (Plan, error) {
	var plan Plan
	deleted := false
	err := withRetry(s.mutateLocked(func(now time.Time) error {
		err := s.apply(b, now, &plan)
		if err != nil {
			// Earlier steps may have changed the document: go back to
			// the last durable one (mutate writes nothing on an error).
			if d, derr := decodeDoc(s.good); derr == nil {
				s.d = d
			} else {
				return wire.Wrap(CodeIO, "cannot roll back a failed batch", derr)
			}
		}
		deleted = err == nil && b.Delete != ""
		return err
	}, func() {
		if deleted {
			delete(s.recovering, b.Delete)
		}
		if b.ConsumePlan != "" {
			delete(s.plans, b.ConsumePlan)
		}
	}, !b.DeferDirSync))
	if err != nil {
		return Plan{}, err
	}
	return plan, nil
}

// apply runs b's steps on the document; s.mu is held.
func (s *Store) apply(b Batch, now time.Time, plan *Plan) error {
	if b.Fence != nil {
		if err := s.raiseFence(b.Fence.Instance, b.Fence.N); err != nil {
			return err
		}
	}
	if b.ConsumePlan != "" {
		p, err := s.livePlan(b.ConsumePlan, now)
		if err != nil {
			return err
		}
		*plan = p // removed by Apply's commit, once the write is durable
	}
	if b.Put != nil {
		if err := s.putContainer(*b.Put, now); err != nil {
			return err
		}
	}
	if b.Delete != "" {
		delete(s.d.Containers, b.Delete)
	}
	if b.Idem != nil {
		if err := s.putIdem(b.Idem.Key, b.Idem.Op, b.Idem.RequestHash, b.Idem.Result, now); err != nil {
			return err
		}
	}
	return nil
}
