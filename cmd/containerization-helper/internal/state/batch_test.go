package state

import (
	"testing"
	"time"

	"github.com/matryer/is"
)

// A batch is all or nothing, and durable as a whole.
func TestApply(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := newClock()
	dir := stateDir(t)
	s := open(t, dir, Options{Now: c.Now})
	exp := c.Now().Add(time.Minute)
	is.NoErr(s.PutPlan(Plan{Hash: "sha256:01", Contents: []byte("create hk-1"), Expires: exp}))
	rec := Container{ID: "hk-1", Instance: inst1, Bundle: "/b/hk-1", Fence: 4, PlanHash: "sha256:01", Phase: PhaseCreating}

	// Begin: fence, plan, in-progress record at once.
	p, err := s.Apply(Batch{Fence: &Fence{Instance: inst1, N: 4}, ConsumePlan: "sha256:01", Put: &rec, DeferDirSync: true})
	is.NoErr(err)
	is.Equal(string(p.Contents), "create hk-1")
	f, err := s.Fence(inst1)
	is.NoErr(err)
	is.Equal(f, uint64(4))

	// A batch that fails after its plan step consumes nothing.
	is.NoErr(s.PutPlan(Plan{Hash: "sha256:02", Contents: []byte("start hk-1"), Expires: exp}))
	bad := Container{ID: "hk-3", Instance: "not-a-uuid", Phase: PhaseCreating}
	_, err = s.Apply(Batch{ConsumePlan: "sha256:02", Put: &bad})
	isCode(t, err, CodeInvalid)
	_, err = s.Plan("sha256:02")
	is.NoErr(err)

	// A failing step (the plan is consumed) undoes the steps before it.
	other := Container{ID: "hk-2", Instance: inst2, Phase: PhaseCreating}
	_, err = s.Apply(Batch{Fence: &Fence{Instance: inst2, N: 9}, ConsumePlan: "sha256:01", Put: &other})
	isCode(t, err, CodePlanUnknown)
	f, err = s.Fence(inst2)
	is.NoErr(err)
	is.Equal(f, uint64(0))
	_, ok, err := s.Container("hk-2")
	is.NoErr(err)
	is.True(!ok)
	_, err = s.Apply(Batch{Fence: &Fence{Instance: inst1, N: 3}, Put: &other}) // stale fence
	isCode(t, err, CodeFenceStale)

	// Finish: the settled phase and the answer at once; a conflicting
	// answer undoes the record too.
	rec.Phase = PhaseCreated
	_, err = s.Apply(Batch{Put: &rec, Idem: &Idem{Key: "0:k1", Op: "container.create", RequestHash: "h1", Result: []byte("ok")}})
	is.NoErr(err)
	rec.Phase = PhaseRunning
	_, err = s.Apply(Batch{Put: &rec, Idem: &Idem{Key: "0:k1", Op: "container.create", RequestHash: "h2"}})
	isCode(t, err, CodeIdemConflict)
	got, _, err := s.Container("hk-1")
	is.NoErr(err)
	is.Equal(got.Phase, PhaseCreated)

	// Delete with the answer; all of it survives a reopen.
	_, err = s.Apply(Batch{Delete: "hk-1", Idem: &Idem{Key: "0:k2", Op: "container.delete", RequestHash: "h3", Result: []byte("gone")}})
	is.NoErr(err)
	s.Close()
	s = open(t, dir, Options{Now: c.Now})
	_, ok, err = s.Container("hk-1")
	is.NoErr(err)
	is.True(!ok)
	res, ok, err := s.Idem("0:k2", "container.delete", "h3")
	is.NoErr(err)
	is.True(ok)
	is.Equal(string(res), "gone")
	res, ok, err = s.Idem("0:k1", "container.create", "h1")
	is.NoErr(err)
	is.True(ok)
	is.Equal(string(res), "ok")
	f, err = s.Fence(inst1)
	is.NoErr(err)
	is.Equal(f, uint64(4))
}
