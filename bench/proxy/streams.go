package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// streamsPerInvocation is how many of the streams section's streams share
// one invocation. Each stream is a tunnel and a request in egressd's
// pipeline for its whole life; egressd bounds both per invocation
// (-proxy-max-tunnels-per-invocation, 128 by default, and
// -proxy-max-requests-per-invocation, 64), and the bench leaves egressd's
// flags as they ship, so it spreads the streams over several invocations
// as several agents would.
const streamsPerInvocation = 40

// streamsResult is the streams section: egressd's resident set (and the
// upstreams' child's, the same streams held by a Go HTTPS server, for
// scale) idle before the streams, at its peak while they are open, and
// after they close; and the one-way latency of their events.
type streamsResult struct {
	streams, opened   int
	dur               time.Duration
	events            int64
	lat               []time.Duration // sorted
	idle, peak, after int64           // egressd VmRSS, bytes
	upIdle, upPeak    int64           // the upstreams' child VmRSS, bytes
	samples           int
	firstErr          string
	profiles          []string // with -pprof: what was saved, and the goroutine totals
}

// streamsRun holds n streams (base/hold, an event every gap) open through
// egressd for dur, spread over e's stream invocations, sampling VmRSS of
// egressd and the upstreams every second. With pprofDir set (and e built
// with pprof), it saves egressd's heap and goroutine profiles there,
// idle and a second before the streams close.
func streamsRun(e *egressdProc, upPid int, base string, n int, gap, dur time.Duration, pprofDir string) streamsResult {
	res := streamsResult{streams: n, dur: dur}
	pid := e.pid()
	clients := make([]*http.Client, len(e.streamInv))
	for i, inv := range e.streamInv {
		clients[i] = client(e.proxyURL(inv.name), e.pool, streamsPerInvocation)
		// Warm-up per invocation: its leaf certificate and the upstream
		// connection pool exist before the idle sample, as on a host that
		// has served a request.
		if resp, err := get(context.Background(), clients[i], base+"/sse?n=1", "Bearer "+inv.placeholder); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		} else {
			res.firstErr = err.Error()
		}
		clients[i].CloseIdleConnections()
	}
	time.Sleep(2 * time.Second)
	var idle, upIdle []int64
	for range 5 {
		idle, upIdle = append(idle, rss(pid)), append(upIdle, rss(upPid))
		time.Sleep(400 * time.Millisecond)
	}
	slices.Sort(idle)
	slices.Sort(upIdle)
	res.idle, res.upIdle = idle[2], upIdle[2]
	snapshot := func(when string) {
		if pprofDir == "" || e.pprof == "" {
			return
		}
		// debug=1 first: its MemStats are the heap as it is (live and
		// garbage); the profile after it collects first (gc=1), so its
		// in-use figures are the live heap.
		_, err := saveProfile(e.pprof, "heap?debug=1", pprofDir, "heap-"+when+".txt")
		if err == nil {
			_, err = saveProfile(e.pprof, "heap?gc=1", pprofDir, "heap-"+when+".pb.gz")
		}
		if err == nil {
			var total string
			total, err = saveProfile(e.pprof, "goroutine?debug=1", pprofDir, "goroutine-"+when+".txt")
			res.profiles = append(res.profiles, when+": "+total+"; "+memStats(filepath.Join(pprofDir, "heap-"+when+".txt")))
		}
		if err != nil {
			res.profiles = append(res.profiles, when+": "+err.Error())
		}
	}
	snapshot("idle")

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var opened, events atomic.Int64
	var errOnce sync.Once
	var lat collector
	url := fmt.Sprintf("%s/hold?gap=%s&dur=%s", base, gap, dur+time.Minute)
	for s := range n {
		inv := s / streamsPerInvocation
		wg.Go(func() {
			resp, err := get(ctx, clients[inv], url, "Bearer "+e.streamInv[inv].placeholder)
			if err != nil {
				errOnce.Do(func() { res.firstErr = err.Error() })
				return
			}
			defer resp.Body.Close()
			opened.Add(1)
			var mine []time.Duration
			readEvents(resp.Body, func(_ int, stamp int64) {
				mine = append(mine, time.Duration(monoNow()-stamp))
				events.Add(1)
			})
			lat.add(mine)
		})
	}
	end := time.Now().Add(dur)
	for time.Now().Before(end) {
		time.Sleep(time.Second)
		res.peak, res.upPeak = max(res.peak, rss(pid)), max(res.upPeak, rss(upPid))
		res.samples++
		if time.Until(end) < time.Second && time.Until(end) >= 0 {
			snapshot("open")
		}
	}
	res.opened = int(opened.Load())
	cancel()
	wg.Wait()
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	time.Sleep(2 * time.Second)
	res.after = rss(pid)
	res.events = events.Load()
	res.lat = lat.d
	slices.Sort(res.lat)
	return res
}
