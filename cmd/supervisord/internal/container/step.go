package container

import (
	"context"

	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/fault"
)

// answer decodes any mutation's answer: a helperapi.Container (create,
// start) or a helperapi.DeleteResponse (delete, with the console log's
// tail). Fields in bytewise order of their keys.
type answer struct {
	ContainerID  string `msgpack:"container_id"`  // both answers
	CreatedAt    int64  `msgpack:"created_at"`    // Container.CreatedAt: Unix ms
	Deleted      bool   `msgpack:"deleted"`       // DeleteResponse.Deleted
	HasLogTail   bool   `msgpack:"has_log_tail"`  // DeleteResponse.HasLogTail: LogTail is the log's tail
	LogTail      []byte `msgpack:"log_tail"`      // DeleteResponse.LogTail: at most 1 MiB
	LogTruncated bool   `msgpack:"log_truncated"` // DeleteResponse.LogTruncated
	Pid          int64  `msgpack:"pid"`           // Container.Pid: host pid of the init; 0 when stopped
	Status       string `msgpack:"status"`        // Container.Status: the OCI status
}

// CodeContainerNotFound is the helper's code for an id its runtime root
// does not hold (its provider package's; docs/protocol.md).
const CodeContainerNotFound = "container.not_found"

// opOf is step's helper op.
func opOf(step string) string {
	switch step {
	case StepCreate:
		return helperapi.OpCreate
	case StepStart:
		return helperapi.OpStart
	default:
		return helperapi.OpDelete
	}
}

// session is one operation's helper connection and negotiation, on one
// instance's record in dir.
type session struct {
	c    *helperapi.Client
	neg  *helperapi.NegotiateResponse
	dir  string
	id   string // instance id
	rec  *Record
	step func(string) // called once per step carried out (logging)
}

// done records step as carried out, with what its answer says.
func (s *session) done(step string, a *answer) {
	r := s.rec
	switch step {
	case StepCreate:
		r.ContainerID, r.CreatedAt = a.ContainerID, a.CreatedAt
	case StepStart:
		r.PID = a.Pid
	case StepDelete:
		if a.HasLogTail && keepLog(s.dir, a.LogTail) == nil { // logcopy.go
			r.LogSaved = true
		}
	}
	if !r.done(step) {
		r.Done = append(r.Done, step)
	}
	r.Pending = nil
	if s.step != nil {
		s.step(step)
	}
}

// definite reports whether a helper error means the mutation had no
// effect: the helper answered with a code whose retry is never or safe.
// Anything else (after_observe, internal, a broken connection, a
// deadline) leaves the effect unknown.
func definite(err error) bool {
	we := wire.AsError(err)
	if isUnreachable(err) || we.Code == wire.CodeInternal {
		return false
	}
	return we.Retry == wire.RetryNever || we.Retry == wire.RetrySafe
}

// run carries out step: a pending mutation is resolved first; a step
// already done does nothing; else a plan is made (pr, with the mutation
// context and container id filled in), recorded as pending (saved, with
// its idempotency key) and carried out. An error whose effect is unknown
// leaves the mutation pending, to be resolved by the next operation.
func (s *session) run(ctx context.Context, step string, pr helperapi.PlanRequest) error {
	if err := s.resolve(ctx); err != nil {
		return err
	}
	if s.rec.done(step) {
		return nil
	}
	pr.Kind = step
	pr.Context = helperapi.Context{CapabilityDigest: s.neg.CapabilityDigest, Fence: s.rec.Fence, InstanceID: s.id, ProjectID: s.neg.ProjectID}
	if step != StepCreate {
		pr.ContainerID = s.rec.ContainerID
	}
	plan, err := s.c.Plan(ctx, &pr)
	if c := wire.CodeOf(err); step == StepDelete && (c == CodeContainerNotFound || c == helperapi.CodeContainerNotOwned) {
		// Gone already (or no longer this instance's): nothing to delete.
		s.done(StepDelete, &answer{})
		return s.rec.Save(s.dir)
	}
	if err != nil {
		return mapErr("container.plan "+step, err)
	}
	s.rec.Attempts++
	s.rec.ProjectID = s.neg.ProjectID
	s.rec.Pending = &Pending{Step: step, Op: opOf(step), Idem: idemKey(s.id, s.rec.KeyGen, step, s.rec.Attempts), ContainerID: plan.ContainerID,
		PlanHash: plan.PlanHash, ProjectID: pr.Context.ProjectID, CapabilityDigest: pr.Context.CapabilityDigest, Fence: pr.Context.Fence}
	if err := s.rec.Save(s.dir); err != nil {
		return err
	}
	fault.Point(fault.ContainerPending)
	var a answer
	err = s.send(ctx, s.rec.Pending, &a)
	if err == nil {
		s.done(step, &a)
		err = s.rec.Save(s.dir)
		fault.Point(fault.ContainerDone)
		return err
	}
	if definite(err) {
		s.rec.Pending = nil
		if serr := s.rec.Save(s.dir); serr != nil {
			return serr
		}
	}
	return mapErr(opOf(step), err)
}

// send sends p's mutation with its key and body.
func (s *session) send(ctx context.Context, p *Pending, a *answer) error {
	req := &helperapi.MutationRequest{ContainerID: p.ContainerID, PlanHash: p.PlanHash,
		Context: helperapi.Context{CapabilityDigest: p.CapabilityDigest, Fence: p.Fence, InstanceID: s.id, ProjectID: p.ProjectID}}
	return s.c.RPC().Call(ctx, p.Op, req, a, rpc.WithIdem(p.Idem))
}

// resolve settles a pending mutation (left by a crash or a broken
// connection): it is replayed with the same key and body, so the helper
// answers what it answered before, or carries it out now. When the replay
// fails (the plan expired, was consumed by a mutation whose answer was
// not kept, the fence moved on), the helper is observed instead and the
// step counts as done when its effect is there; otherwise the next run
// plans it afresh under a new key. runtime.unavailable when the helper
// cannot be reached (the mutation stays pending).
func (s *session) resolve(ctx context.Context) error {
	p := s.rec.Pending
	if p == nil {
		return nil
	}
	var a answer
	err := s.send(ctx, p, &a)
	if err == nil {
		s.done(p.Step, &a)
		return s.rec.Save(s.dir)
	}
	if isUnreachable(err) {
		return unavailable(p.Op+" (replay)", err)
	}
	s.rec.Pending = nil
	if err := s.observe(ctx, p); err != nil {
		s.rec.Pending = p
		return err
	}
	return s.rec.Save(s.dir)
}

// observe marks p's step done when the helper shows its effect: a
// container of this instance exists (create), runs or ran (start), is
// gone (delete).
func (s *session) observe(ctx context.Context, p *Pending) error {
	switch p.Step {
	case StepCreate:
		obs, err := s.c.Observe(ctx)
		if err != nil {
			return unavailable("runtime.observe", err)
		}
		for _, ct := range obs.Containers {
			if ct.InstanceID == s.id && ct.ContainerID == p.ContainerID {
				s.done(StepCreate, &answer{ContainerID: ct.ContainerID, CreatedAt: ct.CreatedAt})
				if ct.Status == "running" || ct.Status == "stopped" {
					s.done(StepStart, &answer{Pid: ct.Pid})
				}
			}
		}
	case StepStart, StepDelete:
		u, err := s.c.Usage(ctx, p.ContainerID)
		switch {
		case wire.CodeOf(err) == CodeContainerNotFound || wire.CodeOf(err) == helperapi.CodeContainerNotOwned:
			s.done(StepDelete, &answer{})
		case err != nil:
			return unavailable("container.usage", err)
		case p.Step == StepStart && u.Status != "created":
			s.done(StepStart, &answer{})
		}
	}
	return nil
}
