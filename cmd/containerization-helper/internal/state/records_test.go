package state

import (
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestFence(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := open(t, stateDir(t), Options{})
	is.NoErr(s.CheckFence(inst1, 0)) // never fenced: 0 is current
	n, err := s.AdvanceFence(inst1)
	is.NoErr(err)
	is.Equal(n, uint64(1))
	is.NoErr(s.CheckFence(inst1, 1)) // current: allowed
	n, err = s.AdvanceFence(inst1)
	is.NoErr(err)
	is.Equal(n, uint64(2))
	err = s.CheckFence(inst1, 1) // moved: refused
	isCode(t, err, CodeFenceStale)
	is.Equal(wire.AsError(err).Retry, wire.RetryAfterObserve)
	is.NoErr(s.CheckFence(inst1, 2))
	is.NoErr(s.CheckFence(inst2, 0)) // fences are per instance
	is.NoErr(s.RaiseFence(inst1, 5))
	isCode(t, s.CheckFence(inst1, 2), CodeFenceStale)
	isCode(t, s.RaiseFence(inst1, 3), CodeFenceStale) // never lowered
	n, _ = s.Fence(inst1)
	is.Equal(n, uint64(5))
	isCode(t, s.CheckFence("INSTANCE", 1), CodeInvalid)
	_, err = s.AdvanceFence("6F1C2A9E-3B4D-4E5F-8A7B-9C0D1E2F3A4B")
	isCode(t, err, CodeInvalid)
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := newClock()
	s := open(t, stateDir(t), Options{Now: c.Now, IdemTTL: time.Hour})
	const key = "1000/container.create/abc"
	_, ok, err := s.Idem(key, "container.create", "h1")
	is.NoErr(err)
	is.True(!ok)
	is.NoErr(s.PutIdem(key, "container.create", "h1", []byte("answer")))
	r, ok, err := s.Idem(key, "container.create", "h1") // replay: the stored answer
	is.NoErr(err)
	is.True(ok)
	is.Equal(string(r), "answer")
	is.NoErr(s.PutIdem(key, "container.create", "h1", []byte("other answer"))) // same request: first answer kept
	r, _, _ = s.Idem(key, "container.create", "h1")
	is.Equal(string(r), "answer")
	_, _, err = s.Idem(key, "container.create", "h2") // another request body
	isCode(t, err, CodeIdemConflict)
	_, _, err = s.Idem(key, "container.delete", "h1") // another op
	isCode(t, err, CodeIdemConflict)
	isCode(t, s.PutIdem(key, "container.create", "h2", nil), CodeIdemConflict)

	c.Add(time.Hour) // expired: the key is free again
	_, ok, err = s.Idem(key, "container.create", "h2")
	is.NoErr(err)
	is.True(!ok)
	is.NoErr(s.PutIdem(key, "container.create", "h2", []byte("new")))
	r, ok, _ = s.Idem(key, "container.create", "h2")
	is.True(ok)
	is.Equal(string(r), "new")

	isCode(t, s.PutIdem("", "op", "h", nil), CodeInvalid)
	isCode(t, s.PutIdem("k", "Op With Spaces", "h", nil), CodeInvalid)
	isCode(t, s.PutIdem("k", "op", "", nil), CodeInvalid)
}

func TestPlans(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	c := newClock()
	dir := stateDir(t)
	s := open(t, dir, Options{Now: c.Now, PlanGrace: time.Hour})
	exp := c.Now().Add(time.Minute)
	is.NoErr(s.PutPlan(Plan{Hash: "sha256:01", Contents: []byte("create hk-1"), Expires: exp}))
	is.NoErr(s.PutPlan(Plan{Hash: "sha256:01", Contents: []byte("create hk-1"), Expires: exp})) // same plan again
	isCode(t, s.PutPlan(Plan{Hash: "sha256:01", Contents: []byte("other"), Expires: exp}), CodeInvalid)
	isCode(t, s.PutPlan(Plan{Hash: "sha256:02", Expires: c.Now()}), CodeInvalid) // already expired
	isCode(t, s.PutPlan(Plan{Hash: "SHA256:02", Expires: exp}), CodeInvalid)

	p, err := s.Plan("sha256:01") // a peek does not consume
	is.NoErr(err)
	is.Equal(string(p.Contents), "create hk-1")
	is.True(p.Expires.Equal(exp))
	p, err = s.ConsumePlan("sha256:01")
	is.NoErr(err)
	is.Equal(string(p.Contents), "create hk-1")
	_, err = s.ConsumePlan("sha256:01") // consumed once
	isCode(t, err, CodePlanUnknown)
	_, err = s.Plan("sha256:01")
	isCode(t, err, CodePlanUnknown)
	_, err = s.ConsumePlan("sha256:never")
	isCode(t, err, CodePlanUnknown)

	// A reopen forgets every plan (they live in memory only), so no plan
	// can come back after a restart.
	is.NoErr(s.PutPlan(Plan{Hash: "sha256:04", Contents: []byte("y"), Expires: c.Now().Add(time.Minute)}))
	s.Close()
	s = open(t, dir, Options{Now: c.Now, PlanGrace: time.Hour})
	_, err = s.Plan("sha256:04")
	isCode(t, err, CodePlanUnknown)

	// Expiry, with the injected clock.
	is.NoErr(s.PutPlan(Plan{Hash: "sha256:03", Contents: []byte("x"), Expires: c.Now().Add(time.Minute)}))
	c.Add(time.Minute)
	_, err = s.Plan("sha256:03")
	isCode(t, err, CodePlanExpired)
	_, err = s.ConsumePlan("sha256:03")
	isCode(t, err, CodePlanExpired)
	c.Add(time.Hour) // past the grace: the next write forgets it
	is.NoErr(s.PutIdem("k", "op", "h", nil))
	_, err = s.Plan("sha256:03")
	isCode(t, err, CodePlanUnknown)
}

// A crash between the in-progress phase and its outcome leaves the record
// in Recovering after Open; it cannot be written until reconciled.
func TestRecovering(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := stateDir(t)
	s := open(t, dir, Options{})
	creating := Container{ID: "hk-aaaa", Instance: inst1, Bundle: "/b/hk-aaaa", Fence: 1, Phase: PhaseCreating}
	running := Container{ID: "hk-bbbb", Instance: inst1, Fence: 1, Phase: PhaseRunning}
	deleting := Container{ID: "hk-cccc", Instance: inst2, Fence: 3, Phase: PhaseDeleting}
	for _, c := range []Container{deleting, running, creating} {
		is.NoErr(s.PutContainer(c))
	}
	is.Equal(len(s.Recovering()), 0) // in progress in this process: not recovering
	is.NoErr(s.PutContainer(Container{ID: "hk-aaaa", Instance: inst1, Fence: 1, Phase: PhaseCreating}))
	s.Close() // the "crash": no outcome written

	s = open(t, dir, Options{})
	rec := s.Recovering()
	is.Equal(len(rec), 2)
	is.Equal(rec[0].ID, "hk-aaaa")
	is.Equal(rec[1].ID, "hk-cccc")
	creating.Phase = PhaseCreated
	isCode(t, s.PutContainer(creating), CodeRecovering) // a blind retry is refused
	isCode(t, s.Reconcile("hk-aaaa", PhaseStarting), CodeInvalid)
	isCode(t, s.Reconcile("hk-zzzz", PhaseCreated), CodeNotFound)
	is.NoErr(s.Reconcile("hk-aaaa", PhaseCreated)) // observed: the runtime has it, created
	is.NoErr(s.DeleteContainer("hk-cccc"))         // observed: gone
	is.Equal(len(s.Recovering()), 0)
	creating.Phase = PhaseStarting
	is.NoErr(s.PutContainer(creating))
	all, err := s.Containers()
	is.NoErr(err)
	is.Equal(len(all), 2)
	is.Equal(all[0].ID, "hk-aaaa")
	is.Equal(all[0].Phase, PhaseStarting)
	is.Equal(all[1].ID, "hk-bbbb")

	for _, bad := range []Container{
		{ID: "../evil", Instance: inst1, Phase: PhaseCreated},
		{ID: "hk-x", Instance: "nope", Phase: PhaseCreated},
		{ID: "hk-x", Instance: inst1, Phase: "flying"},
		{ID: "hk-x", Instance: inst1, Phase: PhaseCreated, Bundle: "relative/b"},
		{ID: "hk-x", Instance: inst1, Phase: PhaseCreated, Bundle: "/a/../b"},
	} {
		isCode(t, s.PutContainer(bad), CodeInvalid)
	}
}

// A fence far ahead of the recorded one is refused: one request must not
// lock every later generation of an instance out.
func TestFenceJumpBounded(t *testing.T) {
	t.Parallel()
	s := open(t, stateDir(t), Options{})
	const inst = "0b6e3c1e-8f0a-4e0e-9d51-1f7a8b2c3d4e"
	if err := s.CheckFence(inst, MaxFenceStep); err != nil {
		t.Fatalf("a fence within the step: %v", err)
	}
	isCode(t, s.CheckFence(inst, ^uint64(0)), CodeInvalid)
	isCode(t, s.RaiseFence(inst, ^uint64(0)), CodeInvalid)
	if err := s.RaiseFence(inst, 3); err != nil {
		t.Fatal(err)
	}
	isCode(t, s.CheckFence(inst, 2), CodeFenceStale)
}
