package main

import (
	"os"
	"slices"
	"testing"
	"time"

	"hostkit.dev/lib/api/helperapi"
)

// TestMeasure reports the helper's round trips with the real binary and
// runc (run with -run TestMeasure -v): the
// health round trip, a plan of a start (the checks before a mutation, no
// runtime process), and plan+create+start+delete of a busybox container,
// as p50 over a few rounds. It runs only with HK_HELPER_MEASURE=1 (it
// takes ~20 s); bench/helper makes the recorded comparison with runc
// called directly, this is the quick local figure.
func TestMeasure(t *testing.T) {
	if os.Getenv("HK_HELPER_MEASURE") != "1" {
		t.Skip("set HK_HELPER_MEASURE=1 to measure")
	}
	_, s, img := helperSession(t)
	ctx := ctxT(t, 5*time.Minute)
	var health []time.Duration
	for i := 0; i < 2000; i++ {
		t0 := time.Now()
		if _, err := s.c.Health(ctx); err != nil {
			t.Fatal(err)
		}
		health = append(health, time.Since(t0))
	}
	created := s.create(t, img, []string{"/bin/sleep", "600"}, nil, false)
	var plans []time.Duration
	for i := 0; i < 500; i++ {
		t0 := time.Now()
		if _, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindStart, ContainerID: created.ContainerID, Context: s.cx}); err != nil {
			t.Fatal(err)
		}
		plans = append(plans, time.Since(t0))
	}
	var cycle []time.Duration
	for i := 0; i < 15; i++ {
		t0 := time.Now()
		// An init that exits on SIGTERM: the forced delete stops it
		// first (SIGTERM, then SIGKILL after the stop timeout).
		p, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindCreate, Context: s.cx, Image: &img, Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; sleep 600 & wait"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.c.Create(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: p.ContainerID, Context: s.cx, PlanHash: p.PlanHash}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.mutate(t, helperapi.KindStart, p.ContainerID); err != nil {
			t.Fatal(err)
		}
		pd, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: p.ContainerID, Context: s.cx, Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.c.Delete(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: p.ContainerID, Context: s.cx, PlanHash: pd.PlanHash}); err != nil {
			t.Fatal(err)
		}
		cycle = append(cycle, time.Since(t0))
	}
	t.Logf("health round trip: p50 %v p99 %v (n=%d)", pct(health, 50), pct(health, 99), len(health))
	t.Logf("plan (start) round trip: p50 %v p99 %v (n=%d)", pct(plans, 50), pct(plans, 99), len(plans))
	t.Logf("plan+create+start+plan+delete: p50 %v min %v max %v (n=%d)", pct(cycle, 50), slices.Min(cycle), slices.Max(cycle), len(cycle))
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
