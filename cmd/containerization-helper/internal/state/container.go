package state

import (
	"slices"
	"strings"
	"time"

	"hostkit.dev/lib/wire"
)

// Phase is a container record's phase. The in-progress phases are
// written before the runtime is asked, the settled ones after it
// answered (package doc, "Recovery"). The values match lib/api/helperapi's
// Phase* strings.
type Phase string

// Phases.
const (
	PhasePlanned  Phase = "planned"
	PhaseCreating Phase = "creating" // in progress
	PhaseCreated  Phase = "created"
	PhaseStarting Phase = "starting" // in progress
	PhaseRunning  Phase = "running"
	PhaseStopping Phase = "stopping" // in progress
	PhaseDeleting Phase = "deleting" // in progress
	PhaseDeleted  Phase = "deleted"
)

// Valid reports whether p is one of the phases above.
func (p Phase) Valid() bool {
	switch p {
	case PhasePlanned, PhaseCreating, PhaseCreated, PhaseStarting, PhaseRunning, PhaseStopping, PhaseDeleting, PhaseDeleted:
		return true
	}
	return false
}

// InProgress reports whether p is written before a runtime command whose
// outcome is not recorded yet.
func (p Phase) InProgress() bool {
	return p == PhaseCreating || p == PhaseStarting || p == PhaseStopping || p == PhaseDeleting
}

// Container is a container record.
type Container struct {
	ID         string    // [a-z0-9][a-z0-9_.-]{0,63}, no ".."
	Instance   string    // canonical UUID
	Bundle     string    // absolute clean path, or ""
	ConsoleLog string    // absolute clean path, or ""
	Fence      uint64    // the instance fence the container was planned with
	PlanHash   string    // "" or a plan hash
	Phase      Phase     // written before the runtime is asked: a crash leaves the intent
	Updated    time.Time // set by the store
}

// validate checks c's fields.
func (c Container) validate() error {
	bad := func(msg string) error { return wire.Errorf(CodeInvalid, "container record: %s", msg) }
	switch {
	case !validContainerID(c.ID):
		return bad("id must match [a-z0-9][a-z0-9_.-]{0,63} without \"..\"")
	case !ValidUUID(c.Instance):
		return bad("instance is not a canonical UUID")
	case !validPath(c.Bundle) || !validPath(c.ConsoleLog):
		return bad("bundle and console log must be absolute clean paths")
	case c.PlanHash != "" && !validHash(c.PlanHash):
		return bad("plan hash is malformed")
	case !c.Phase.Valid():
		return bad("unknown phase")
	}
	return nil
}

func (c contJSON) toContainer(id string) Container {
	return Container{ID: id, Instance: c.Instance, Bundle: c.Bundle, ConsoleLog: c.ConsoleLog, Fence: c.Fence,
		PlanHash: c.PlanHash, Phase: c.Phase, Updated: time.UnixMilli(c.UpdatedMS)}
}

// PutContainer creates or replaces c's record durably (Updated is set to
// now). Writing an in-progress phase before asking the runtime, and the
// settled phase after, is what makes recovery possible. A record that
// Recovering lists is refused (CodeRecovering) until Reconcile. Fences are
// not checked here (a cleanup may follow a newer fence): callers use
// CheckFence before acting. Errors also: CodeInvalid, CodeFull, CodeIO.
func (s *Store) PutContainer(c Container) error {
	return s.mutate(func(now time.Time) error { return s.putContainer(c, now) }, nil)
}

// putContainer is PutContainer's change; s.mu is held.
func (s *Store) putContainer(c Container, now time.Time) error {
	if err := c.validate(); err != nil {
		return err
	}
	if s.recovering[c.ID] {
		return recoveringErr()
	}
	if _, ok := s.d.Containers[c.ID]; !ok && len(s.d.Containers) >= s.opt.MaxContainers {
		return wire.Errorf(CodeFull, "too many container records")
	}
	s.d.Containers[c.ID] = contJSON{Instance: c.Instance, Bundle: c.Bundle, ConsoleLog: c.ConsoleLog,
		Fence: c.Fence, PlanHash: c.PlanHash, Phase: c.Phase, UpdatedMS: now.UnixMilli()}
	return nil
}

// Reconcile records phase, which the helper observed in the runtime, for
// id's record and takes it off the Recovering list. phase must be settled
// (not in progress). Errors: CodeNotFound, CodeInvalid, CodeIO.
func (s *Store) Reconcile(id string, phase Phase) error {
	return s.mutate(func(now time.Time) error {
		if !phase.Valid() || phase.InProgress() {
			return wire.Errorf(CodeInvalid, "reconcile needs an observed, settled phase")
		}
		c, ok := s.d.Containers[id]
		if !ok {
			return wire.Errorf(CodeNotFound, "no container record with that id")
		}
		c.Phase, c.UpdatedMS = phase, now.UnixMilli()
		s.d.Containers[id] = c
		return nil
	}, func() { delete(s.recovering, id) })
}

// DeleteContainer removes id's record durably (absent is fine), for
// example after the runtime confirmed the container is gone; it also
// takes it off the Recovering list. Errors: CodeIO.
func (s *Store) DeleteContainer(id string) error {
	return s.mutate(func(time.Time) error {
		delete(s.d.Containers, id)
		return nil
	}, func() { delete(s.recovering, id) })
}

// Container returns id's record.
func (s *Store) Container(id string) (Container, bool, error) {
	var out Container
	var found bool
	err := s.read(func() error {
		c, ok := s.d.Containers[id]
		if ok {
			out, found = c.toContainer(id), true
		}
		return nil
	})
	return out, found, err
}

// Containers returns every record, sorted by id.
func (s *Store) Containers() ([]Container, error) {
	var out []Container
	err := s.read(func() error {
		out = s.collect(func(string) bool { return true })
		return nil
	})
	return out, err
}

// Recovering returns, sorted by id, the records that were in progress when
// Open loaded the state and have not been reconciled or deleted since
// (package doc, "Recovery").
func (s *Store) Recovering() []Container {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.collect(func(id string) bool { return s.recovering[id] })
}

// collect returns the records whose id passes keep, sorted; s.mu is held.
func (s *Store) collect(keep func(string) bool) []Container {
	out := []Container{}
	for id, c := range s.d.Containers {
		if keep(id) {
			out = append(out, c.toContainer(id))
		}
	}
	slices.SortFunc(out, func(a, b Container) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func recoveringErr() error {
	return &wire.Error{Code: CodeRecovering, Msg: "the container was in progress when the helper stopped; observe it first", Retry: wire.RetryAfterObserve}
}
