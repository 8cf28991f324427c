package main

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/wire"
)

// canary is a secret-looking value that travels in a container's
// environment; it must never reach the helper's logs, audit or errors.
const canary = "hkcanary-7d1f0c9e52b84a6f"

func newUUID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func newIdem(t *testing.T) string { return newUUID(t) }

// fixture builds the busybox fixture image for one test.
func fixture(t *testing.T) helperapi.ImageRef {
	t.Helper()
	layout, d := imagetest.Build(t, t.TempDir())
	return helperapi.ImageRef{Layout: layout, ManifestDigest: d.String()}
}

// session is a helper, its client and one instance's mutation context.
type session struct {
	h   *helperProc
	c   *helperapi.Client
	neg *helperapi.NegotiateResponse
	cx  helperapi.Context
}

func newSession(t *testing.T, h *helperProc) *session {
	t.Helper()
	c := h.client(t)
	neg, err := c.Negotiate(ctxT(t, 30*time.Second), nil)
	if err != nil {
		time.Sleep(200 * time.Millisecond)
		t.Fatalf("negotiate: %v\n%s", err, h.stderr.String())
	}
	return &session{h: h, c: c, neg: neg, cx: helperapi.Context{CapabilityDigest: neg.CapabilityDigest, Fence: 1, InstanceID: newUUID(t), ProjectID: neg.ProjectID}}
}

// helperSession starts a helper on a fresh root that allows this test
// binary, opens a session on it and builds the fixture image.
func helperSession(t *testing.T) (*helperProc, *session, helperapi.ImageRef) {
	t.Helper()
	img := fixture(t)
	h := startHelper(t, "", newRoot(t), "-allow-exe", selfExe(t))
	return h, newSession(t, h), img
}

// createRunning plans and creates a container running cmd (and starts it
// when start is set); it is force-deleted at the end of the test.
func (s *session) create(t *testing.T, img helperapi.ImageRef, cmd, env []string, start bool) *helperapi.Container {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	p, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindCreate, Context: s.cx, Image: &img, Command: cmd, Env: env})
	if err != nil {
		t.Fatalf("plan create: %v\n%s", err, s.h.stderr.String())
	}
	c, err := s.c.Create(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: p.ContainerID, Context: s.cx, PlanHash: p.PlanHash})
	if err != nil {
		t.Fatalf("create: %v\n%s", err, s.h.stderr.String())
	}
	t.Cleanup(func() { s.forceDelete(t, c.ContainerID) })
	if start {
		if c, err = s.mutate(t, helperapi.KindStart, c.ContainerID); err != nil {
			t.Fatalf("start: %v\n%s", err, s.h.stderr.String())
		}
	}
	return c
}

// mutate plans kind on id and carries it out with a fresh key.
func (s *session) mutate(t *testing.T, kind, id string) (*helperapi.Container, error) {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	p, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: kind, ContainerID: id, Context: s.cx})
	if err != nil {
		return nil, err
	}
	req := &helperapi.MutationRequest{ContainerID: id, Context: s.cx, PlanHash: p.PlanHash}
	switch kind {
	case helperapi.KindStart:
		return s.c.Start(ctx, newIdem(t), req)
	case helperapi.KindRestart:
		return s.c.Restart(ctx, newIdem(t), req)
	}
	t.Fatalf("mutate: kind %s", kind)
	return nil, nil
}

// forceDelete removes id through the helper if it still exists.
func (s *session) forceDelete(t *testing.T, id string) {
	ctx := ctxT(t, time.Minute)
	select {
	case <-s.h.done:
		return // the test ended the helper; it cleans up itself
	default:
	}
	p, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: id, Context: s.cx, Force: true})
	if wire.CodeOf(err) == helperapi.CodeContainerNotOwned || wire.CodeOf(err) == "container.not_found" {
		return
	}
	if err != nil {
		t.Errorf("cleanup plan delete %s: %v", id, err)
		return
	}
	if _, err := s.c.Delete(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: id, Context: s.cx, PlanHash: p.PlanHash}); err != nil {
		t.Errorf("cleanup delete %s: %v", id, err)
	}
}

// TestLifecycle drives one container through every op: negotiate,
// image.evidence, plan → create → start → usage → logs → restart →
// delete, with idempotency keys replayed and misused, and scans every
// output of the helper for the canary that travelled in the container's
// environment.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h, s, img := helperSession(t)
	ctx := ctxT(t, 3*time.Minute)

	is.Equal(s.neg.Provider, "runc")
	is.Equal(s.neg.Codec, "runc-1.1")
	is.True(strings.HasPrefix(s.neg.CapabilityDigest, "sha256:"))
	hl, err := s.c.Health(ctx)
	is.NoErr(err)
	is.Equal(hl.Status, "ok")
	is.Equal(hl.ProjectID, s.neg.ProjectID)
	is.Equal(hl.CapabilityDigest, s.neg.CapabilityDigest)
	is.Equal(hl.IdleTimeoutMS, int64(60_000))

	ev, err := s.c.Evidence(ctx, img)
	is.NoErr(err)
	is.Equal(ev.ManifestDigest, img.ManifestDigest)
	is.True(len(ev.Layers) >= 1)
	is.True(ev.TotalSize > 0)

	// plan → create, with the key replayed (same answer) and reused for
	// another body (conflict).
	cmd := []string{"/bin/sh", "-c", "echo hello-from-container; echo \"$SECRET_TOKEN\" | wc -c; exec sleep 600"}
	env := []string{"PATH=/bin", "SECRET_TOKEN=" + canary}
	p, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindCreate, Context: s.cx, Image: &img, Command: cmd, Env: env})
	is.NoErr(err)
	is.True(strings.HasPrefix(p.ContainerID, helperapi.ContainerIDPrefix))
	is.True(strings.HasPrefix(p.PlanHash, "sha256:"))
	req := &helperapi.MutationRequest{ContainerID: p.ContainerID, Context: s.cx, PlanHash: p.PlanHash}
	key := newIdem(t)
	c1, err := s.c.Create(ctx, key, req)
	if err != nil {
		t.Fatalf("create: %v\n%s", err, h.stderr.String())
	}
	defer s.forceDelete(t, c1.ContainerID)
	is.Equal(c1.Status, "created")
	is.Equal(c1.Phase, helperapi.PhaseCreated)
	is.Equal(c1.InstanceID, s.cx.InstanceID)
	is.Equal(c1.Fence, uint64(1))
	c2, err := s.c.Create(ctx, key, req) // replay: the stored answer, nothing runs again
	is.NoErr(err)
	is.Equal(*c2, *c1)
	other := *req
	other.Context.Fence = 2
	_, err = s.c.Create(ctx, key, &other)
	is.Equal(wire.CodeOf(err), wire.CodeRequestIdemConflict)
	_, err = s.c.Create(ctx, newIdem(t), req) // the plan was consumed
	is.Equal(wire.CodeOf(err), "plan.unknown")

	// start → usage → logs
	c3, err := s.mutate(t, helperapi.KindStart, c1.ContainerID)
	is.NoErr(err)
	is.Equal(c3.Status, "running")
	is.True(c3.Pid > 0)
	u, err := s.c.Usage(ctx, c1.ContainerID)
	is.NoErr(err)
	is.Equal(u.Status, "running")
	is.True(u.Pids >= 1)
	var logs *helperapi.LogsResponse
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if logs, err = s.c.Logs(ctx, &helperapi.LogsRequest{ContainerID: c1.ContainerID}); err == nil && strings.Contains(string(logs.Data), "hello-from-container") {
			break
		}
	}
	is.NoErr(err)
	is.True(strings.Contains(string(logs.Data), "hello-from-container"))
	short, err := s.c.Logs(ctx, &helperapi.LogsRequest{ContainerID: c1.ContainerID, MaxBytes: 3})
	is.NoErr(err)
	is.Equal(len(short.Data), 3)
	is.True(short.Truncated)

	// restart: a new init, output appended to the same console log. The
	// shell runs "exec sleep", and init ignores SIGTERM, so the stop goes
	// to SIGKILL after the plan's timeout.
	pr, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindRestart, ContainerID: c1.ContainerID, Context: s.cx, StopTimeoutMS: 200})
	is.NoErr(err)
	c4, err := s.c.Restart(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: c1.ContainerID, Context: s.cx, PlanHash: pr.PlanHash})
	if err != nil {
		t.Fatalf("restart: %v\n%s", err, h.stderr.String())
	}
	is.Equal(c4.Status, "running")
	is.True(c4.Pid != c3.Pid)

	obs, err := s.c.Observe(ctx)
	is.NoErr(err)
	is.Equal(len(obs.Containers), 1)
	is.Equal(obs.Containers[0].ContainerID, c1.ContainerID)
	is.Equal(obs.Containers[0].Phase, helperapi.PhaseRunning)
	is.True(!obs.Containers[0].Orphan)
	obs2, err := s.c.Observe(ctx)
	is.NoErr(err)
	is.Equal(obs2.Digest, obs.Digest) // nothing changed: same digest

	// delete of a running container needs a forced plan.
	pd, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: c1.ContainerID, Context: s.cx})
	is.NoErr(err)
	_, err = s.c.Delete(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: c1.ContainerID, Context: s.cx, PlanHash: pd.PlanHash})
	is.Equal(wire.CodeOf(err), "container.bad_state")
	pd, err = s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: c1.ContainerID, Context: s.cx, Force: true})
	is.NoErr(err)
	dkey := newIdem(t)
	dreq := &helperapi.MutationRequest{ContainerID: c1.ContainerID, Context: s.cx, PlanHash: pd.PlanHash}
	d, err := s.c.Delete(ctx, dkey, dreq)
	is.NoErr(err)
	is.True(d.Deleted)
	d2, err := s.c.Delete(ctx, dkey, dreq)
	is.NoErr(err)
	is.Equal(*d2, *d)
	obs, err = s.c.Observe(ctx)
	is.NoErr(err)
	is.Equal(len(obs.Containers), 0)
	_, err = s.c.Usage(ctx, c1.ContainerID)
	is.Equal(wire.CodeOf(err), "container.not_found")

	// A create whose command cannot run fails (runc checks the
	// executable at create) and leaves nothing behind; its error, like
	// everything else, must not carry the canary.
	pb, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindCreate, Context: s.cx, Image: &img,
		Command: []string{"/nonexistent-binary", "--token=" + canary}, Env: []string{"TOKEN=" + canary}})
	is.NoErr(err)
	_, err = s.c.Create(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: pb.ContainerID, Context: s.cx, PlanHash: pb.PlanHash})
	is.Equal(wire.CodeOf(err), "provider.failed")
	is.True(!strings.Contains(err.Error(), canary))
	obs, err = s.c.Observe(ctx)
	is.NoErr(err)
	is.Equal(len(obs.Containers)+len(obs.Foreign), 0)

	h.stop(t)
	is.True(!strings.Contains(h.stderr.String(), canary)) // logs
	audit := h.auditText(t)
	is.True(!strings.Contains(audit, canary))
	for _, op := range []string{helperapi.OpPlan, helperapi.OpCreate, helperapi.OpStart, helperapi.OpRestart, helperapi.OpDelete, helperapi.OpUsage, helperapi.OpLogs, helperapi.OpObserve, helperapi.OpEvidence, helperapi.OpNegotiate} {
		is.True(strings.Contains(audit, `"op":"`+op+`"`)) // every op is audited
	}
}
