package main

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// TestOrphanAfterKill: the helper is killed (SIGKILL) between create and
// start. A new helper on the same root shows the container as an orphan
// in created, and deletes it by its exact id.
func TestOrphanAfterKill(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	img := fixture(t)
	root := newRoot(t)
	h1 := startHelper(t, "", root, "-allow-exe", selfExe(t))
	s1 := newSession(t, h1)
	ctx := ctxT(t, 2*time.Minute)
	p, err := s1.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindCreate, Context: s1.cx, Image: &img, Command: []string{"/bin/sleep", "600"}})
	is.NoErr(err)
	c, err := s1.c.Create(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: p.ContainerID, Context: s1.cx, PlanHash: p.PlanHash})
	is.NoErr(err)
	t.Cleanup(func() { // should the test stop before the helper deletes it
		exec.Command("/usr/sbin/runc", "--root", runtimeRoot(root), "delete", "--force", c.ContainerID).Run()
	})
	is.True(!c.Orphan) // its creator lives
	h1.kill9()

	h2 := startHelper(t, "", root, "-allow-exe", selfExe(t))
	s2 := newSession(t, h2)
	is.Equal(s2.neg.ProjectID, s1.neg.ProjectID) // the project binding survives
	s2.cx.InstanceID = s1.cx.InstanceID
	obs, err := s2.c.Observe(ctx)
	is.NoErr(err)
	is.Equal(len(obs.Containers), 1)
	o := obs.Containers[0]
	is.Equal(o.ContainerID, c.ContainerID)
	is.Equal(o.Status, "created")
	is.True(o.Orphan)
	is.Equal(o.InstanceID, s1.cx.InstanceID)

	pd, err := s2.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: o.ContainerID, Context: s2.cx})
	is.NoErr(err)
	d, err := s2.c.Delete(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: o.ContainerID, Context: s2.cx, PlanHash: pd.PlanHash})
	is.NoErr(err)
	is.True(d.Deleted)
	obs, err = s2.c.Observe(ctx)
	is.NoErr(err)
	is.Equal(len(obs.Containers), 0)
}

// TestCancelSlowOp: op.cancel ends an op under way from another
// connection: a restart waits for a container whose init ignores SIGTERM
// (pid 1 of its namespace with no handler) for a minute; cancelled by its
// correlation id, it answers op.cancelled at once, and the container is
// left to observe and delete.
func TestCancelSlowOp(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h, s, img := helperSession(t)
	ctx := ctxT(t, 2*time.Minute)
	c := s.create(t, img, []string{"/bin/sleep", "600"}, nil, true)
	p, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindRestart, ContainerID: c.ContainerID, Context: s.cx, StopTimeoutMS: 60_000})
	is.NoErr(err)

	slow := h.client(t) // a connection of its own: calls on one client are serialized
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := slow.Restart(rpc.WithCorr(ctx, "slow-restart-1"), newIdem(t), &helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s.cx, PlanHash: p.PlanHash})
		done <- err
	}()
	// Wait until the restart is under way (health counts itself too).
	for {
		hl, err := s.c.Health(ctx)
		is.NoErr(err)
		if hl.InFlight >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // into the wait for SIGTERM to work
	_, err = s.c.Cancel(ctx, &helperapi.CancelRequest{Corr: "no-such-op"})
	is.Equal(wire.CodeOf(err), helperapi.CodeOpNotFound)
	r, err := s.c.Cancel(ctx, &helperapi.CancelRequest{Corr: "slow-restart-1"})
	is.NoErr(err)
	is.Equal(r.Cancelled, int64(1))
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled restart did not answer")
	}
	is.Equal(wire.CodeOf(err), helperapi.CodeOpCancelled)
	is.True(time.Since(start) < 30*time.Second)
	is.Equal(wire.AsError(err).Retry, wire.RetryAfterObserve)
	obs, err := s.c.Observe(context.Background())
	is.NoErr(err)
	is.Equal(len(obs.Containers), 1)
	is.Equal(obs.Containers[0].Status, "running") // the stop never completed
}
