package state

import (
	"bytes"
	"slices"
	"time"

	"hostkit.dev/lib/wire"
)

// Plan is a plan record: the mutation a `container.plan` answer
// confirmed, under its hash. Contents are the caller's encoding of the
// plan (at most 64 KiB), opaque to the store. Plans live in the Store's
// memory only (package doc, "Plans").
type Plan struct {
	Hash     string    // 1–128 bytes of [a-z0-9_.:-], e.g. "sha256:<hex>"
	Contents []byte    // the plan's encoding, at most 64 KiB
	Created  time.Time // set by PutPlan
	Expires  time.Time // required; after it the plan is CodePlanExpired
}

// PutPlan keeps p (in memory: nothing is written). Storing the same hash
// with the same contents again is a no-op; with other contents it is
// CodeInvalid (a hash names one plan). Errors also: CodeFull, CodeClosed.
func (s *Store) PutPlan(p Plan) error {
	return s.read(func() error {
		now := s.opt.Now()
		switch {
		case !validHash(p.Hash):
			return wire.Errorf(CodeInvalid, "plan hash must be 1 to %d bytes of [a-z0-9_.:-]", maxHashBytes)
		case len(p.Contents) > maxPlanBytes:
			return wire.Errorf(CodeInvalid, "plan contents are larger than %d bytes", maxPlanBytes)
		case !p.Expires.After(now):
			return wire.Errorf(CodeInvalid, "plan expiry must be in the future")
		}
		if old, ok := s.plans[p.Hash]; ok {
			if !bytes.Equal(old.Contents, p.Contents) {
				return wire.Errorf(CodeInvalid, "another plan is stored under this hash")
			}
			return nil
		}
		if len(s.plans) >= s.opt.MaxPlans {
			s.makePlanRoom(now)
		}
		s.plans[p.Hash] = planJSON{Contents: slices.Clone(p.Contents), CreatedMS: now.UnixMilli(), ExpiresMS: p.Expires.UnixMilli()}
		return nil
	})
}

// Plan returns the live plan stored under hash without consuming it.
// Errors: CodePlanUnknown, CodePlanExpired, CodeClosed.
func (s *Store) Plan(hash string) (Plan, error) {
	var out Plan
	err := s.read(func() error {
		var err error
		out, err = s.livePlan(hash, s.opt.Now())
		return err
	})
	return out, err
}

// ConsumePlan removes the plan under hash and returns it, so a plan
// confirms one mutation only: a second consume, like a hash never stored,
// is CodePlanUnknown; a plan past its expiry is CodePlanExpired (and stays
// until swept). A mutation consumes its plan with Apply instead, in the
// same step as its durable writes. Errors also: CodeClosed.
func (s *Store) ConsumePlan(hash string) (Plan, error) {
	var out Plan
	err := s.read(func() error {
		var err error
		if out, err = s.livePlan(hash, s.opt.Now()); err == nil {
			delete(s.plans, hash)
		}
		return err
	})
	if err != nil {
		return Plan{}, err
	}
	return out, nil
}

// livePlan looks hash up; s.mu is held.
func (s *Store) livePlan(hash string, now time.Time) (Plan, error) {
	p, ok := s.plans[hash]
	if !ok || !validHash(hash) {
		return Plan{}, wire.Errorf(CodePlanUnknown, "no such plan (never made, already used, long expired, or made before the helper restarted: plans live in memory); plan again")
	}
	if p.ExpiresMS <= now.UnixMilli() {
		return Plan{}, wire.Errorf(CodePlanExpired, "the plan expired; plan again")
	}
	return Plan{Hash: hash, Contents: slices.Clone(p.Contents),
		Created: time.UnixMilli(p.CreatedMS), Expires: time.UnixMilli(p.ExpiresMS)}, nil
}

// makePlanRoom frees one plan slot when the table is full: first every
// plan past its expiry (their grace is for reporting plan.expired, not
// worth refusing new plans for), then, if none had expired, the oldest
// live plan (its caller gets plan.unknown and plans again). A client that
// floods container.plan can thus only push out unconsumed plans; it can
// never stop everyone from planning.
func (s *Store) makePlanRoom(now time.Time) {
	for h, p := range s.plans {
		if p.ExpiresMS <= now.UnixMilli() {
			delete(s.plans, h)
		}
	}
	if len(s.plans) < s.opt.MaxPlans {
		return
	}
	var oldest string
	var at int64
	for h, p := range s.plans {
		if oldest == "" || p.CreatedMS < at || p.CreatedMS == at && h < oldest {
			oldest, at = h, p.CreatedMS
		}
	}
	delete(s.plans, oldest)
}
