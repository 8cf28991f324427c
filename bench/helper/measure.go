//go:build linux

package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// lifecycle alternates the three arms n times (after one warm-up cycle of
// each, which also fills the helper's rootfs cache) and prints their
// p50/p99 and the ratio against the target.
func lifecycle(ctx context.Context, h *helperProc, img image, dir string, n int, trace bool) (bool, error) {
	// The template's container stays (created) until the end: with a
	// helper that unpacks a rootfs into each bundle, the direct runs use
	// that bundle's rootfs.
	id, err := h.create(ctx, img, benchCmd...) // also fills the rootfs cache
	if err != nil {
		return false, err
	}
	defer h.delete(ctx, id)
	d, err := newDirect(dir, h.stateDir(), id)
	if err != nil {
		return false, err
	}
	arms := []struct {
		name string
		run  func() (time.Duration, error)
		d    []time.Duration
	}{
		{name: "direct runc (helper's flags)", run: func() (time.Duration, error) { return d.cycle(ctx, false, trace) }},
		{name: "through the helper", run: func() (time.Duration, error) { return h.cycle(ctx, img, trace) }},
		{name: "direct runc, delete --force", run: func() (time.Duration, error) { return d.cycle(ctx, true, false) }},
	}
	for i := -1; i < n; i++ {
		for a := range arms {
			took, err := arms[a].run()
			if err != nil {
				return false, fmt.Errorf("%s: %w", arms[a].name, err)
			}
			if i >= 0 { // i == -1 warms each arm up
				arms[a].d = append(arms[a].d, took)
			}
		}
	}
	fmt.Println("create+start+delete of a busybox container (sh: trap TERM; sleep 600 & wait):")
	for _, a := range arms {
		fmt.Printf("  %-30s p50 %8s  p99 %8s  min %8s  (n=%d)\n", a.name, ms(pct(a.d, 50)), ms(pct(a.d, 99)), ms(slices.Min(a.d)), len(a.d))
	}
	ratio := float64(pct(arms[1].d, 50)) / float64(pct(arms[0].d, 50))
	ok := ratio <= targetRatio
	fmt.Printf("  helper / direct (p50): %.2fx (target <= %.2fx): %s\n", ratio, targetRatio, verdict(ok))
	fmt.Printf("  helper / direct with delete --force (p50): %.2fx (for reference)\n", float64(pct(arms[1].d, 50))/float64(pct(arms[2].d, 50)))
	// The helper sends its stop's SIGTERM through a pidfd of the init, the
	// direct arm runs `runc kill`: the ratio without that process.
	kill := pct(d.kills[1:], 50) // [0] is the warm-up's
	fmt.Printf("  direct's runc kill p50 %s; helper / (direct - runc kill) (p50): %.2fx (for reference)\n", ms(kill), float64(pct(arms[1].d, 50))/float64(pct(arms[0].d, 50)-kill))
	return ok, nil
}

// observe creates owned containers through the helper, times
// runtime.observe and `runc list --format json` of the helper's root
// (alternating), and deletes them again.
func observe(ctx context.Context, h *helperProc, img image, owned, calls int) (bool, error) {
	ids := make([]string, 0, owned)
	defer func() {
		for _, id := range ids {
			if err := h.delete(ctx, id); err != nil {
				fmt.Println("cleanup:", id, err)
			}
		}
	}()
	t0 := time.Now()
	for range owned {
		id, err := h.create(ctx, img, benchCmd...)
		if err != nil {
			return false, err
		}
		ids = append(ids, id)
	}
	made := time.Since(t0)
	var obs, list []time.Duration
	root := filepath.Join(h.stateDir(), "runtime")
	for i := -1; i < calls; i++ {
		t := time.Now()
		r, err := h.c.Observe(ctx)
		if err != nil {
			return false, err
		}
		if len(r.Containers) != owned {
			return false, fmt.Errorf("observe: %d containers, want %d", len(r.Containers), owned)
		}
		do := time.Since(t)
		t = time.Now()
		if out, err := exec.Command(runcPath, "--root", root, "list", "--format", "json").Output(); err != nil || len(out) == 0 {
			return false, fmt.Errorf("runc list: %v", err)
		}
		dl := time.Since(t)
		if i >= 0 {
			obs, list = append(obs, do), append(list, dl)
		}
	}
	fmt.Printf("runtime.observe with %d owned containers (created; made in %s, %s each):\n", owned, ms(made), ms(made/time.Duration(owned)))
	fmt.Printf("  %-30s p50 %8s  p99 %8s  (n=%d)\n", "helper runtime.observe", ms(pct(obs, 50)), ms(pct(obs, 99)), len(obs))
	fmt.Printf("  %-30s p50 %8s  p99 %8s  (n=%d)\n", "runc list --format json", ms(pct(list, 50)), ms(pct(list, 99)), len(list))
	ok := pct(obs, 50) <= targetObserve
	fmt.Printf("  observe p50 %s (target <= %s): %s\n", ms(pct(obs, 50)), ms(targetObserve), verdict(ok))
	return ok, nil
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// benchCmd is the container's command in both arms: an init that exits
// on SIGTERM, as a well-behaved agent does, so a stop (the helper's
// forced delete: SIGTERM, then SIGKILL after the stop timeout) measures
// the runtime and not the grace period.
var benchCmd = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; sleep 600 & wait"}
