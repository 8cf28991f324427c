//go:build linux

package main

import (
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
)

// crashIterations is TestCrashLoop's number of kills. The default keeps
// the ordinary test run short; scripts/crashloop (called by scripts/test)
// runs 100.
var crashIterations = flag.Int("crash-iterations", 3, "TestCrashLoop: kill -9 supervisord this many times during concurrent credentialed provisions")

// crashBase is where TestCrashLoop makes its root: a kill -9 keeps the
// page cache, so what it checks does not depend on fsync, and on tmpfs
// the loop does not wait for the disk's journal (it is I/O-bound on a
// shared disk otherwise).
var crashBase = flag.String("crash-base", "/dev/shm", "TestCrashLoop: the directory its root is made in (a tmpfs; /tmp if it does not exist)")

// crashParallel is how many credentialed provisions are in flight when
// supervisord is killed.
const crashParallel = 20

// TestCrashLoop kills supervisord (kill -9) at a random moment while
// crashParallel credentialed provisions are in flight, restarts it and
// checks for real, every iteration: no orphan directory, no lease and no
// bundle that no instance owns, every acknowledged instance running with
// its agent, no orphan process or holder. The kill moment is drawn from
// the span the provisions took in the previous iteration, so kills land
// before, during and after every step.
func TestCrashLoop(t *testing.T) {
	base := *crashBase
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() {
		base = "/tmp"
	}
	s := newCrashStackIn(t, base)
	start := time.Now()
	// The window: how long crashParallel provisions take here, now,
	// without a kill (all acknowledged), plus a fifth.
	acked, span := s.provisionRound(-1)
	if len(acked) != crashParallel {
		t.Fatalf("without a kill, %d of %d provisions succeeded", len(acked), crashParallel)
	}
	span = span * 6 / 5
	counts := map[string]int{}
	var tClean, tDestroy, tRound, tBoot time.Duration
	for i := 0; i < *crashIterations; i++ {
		t0 := time.Now()
		s.waitClean(t, acked)
		t1 := time.Now()
		s.destroyAllNow(t) // what it leaves, if anything, the next check finds
		t2 := time.Now()
		acked, _ = s.provisionRound(time.Duration(rand.Int64N(int64(span))))
		t3 := time.Now()
		tClean, tDestroy, tRound = tClean+t1.Sub(t0), tDestroy+t2.Sub(t1), tRound+t3.Sub(t2)
		switch n := len(acked); {
		case n == 0:
			counts["none"]++
		case n == crashParallel:
			counts["all"]++
		default:
			counts["some"]++
		}
		t4 := time.Now()
		s.boot()
		tBoot += time.Since(t4)
	}
	s.waitClean(t, acked)
	s.destroyAllChecked(t)
	t.Logf("%d kills, %d passed, in %v (window %v; acknowledged before the kill: none %d, some %d, all %d; time in checks %v, destroys %v, provision rounds %v, restarts %v)",
		*crashIterations, *crashIterations, time.Since(start).Round(time.Millisecond), span.Round(time.Millisecond),
		counts["none"], counts["some"], counts["all"], tClean.Round(time.Millisecond), tDestroy.Round(time.Millisecond),
		tRound.Round(time.Millisecond), tBoot.Round(time.Millisecond))
}

// provisionRound starts crashParallel credentialed provisions at once and
// kills supervisord after kill (never when kill < 0). It returns the
// acknowledged instances (id → agent pid) and how long the round took.
func (s *crashStack) provisionRound(kill time.Duration) (map[string]int64, time.Duration) {
	acked := map[string]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	began := time.Now()
	for range crashParallel {
		wg.Go(func() {
			rc := rpc.NewClient(s.sock(), 30*time.Second)
			defer rc.Close()
			in, err := api.NewClient(rc).Provision(context.Background(), credReq())
			if err != nil {
				return
			}
			mu.Lock()
			acked[in.InstanceID] = in.PID
			mu.Unlock()
		})
	}
	if kill >= 0 {
		time.Sleep(kill)
		s.kill()
	}
	wg.Wait()
	return acked, time.Since(began)
}
