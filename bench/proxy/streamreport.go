package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The streaming sections' targets.
const (
	sseP99Line  = 2 * time.Millisecond    // egressd's p99 event latency minus direct's, at most
	sseTTFBLine = 1500 * time.Microsecond // egressd's p50 time to first byte (warm) minus direct's, at most
	bulkLine    = 0.5                     // egressd's MB/s over direct's, at least
	streamsLine = 32 << 20                // egressd's peak VmRSS above idle with the streams open, bytes, at most
)

// bulkResult is one mode's download in the bulk section.
type bulkResult struct {
	mode, body   string
	round        int
	mbps         float64
	took         time.Duration
	cpu, loadCPU time.Duration // per GiB: egressd's (0: not measured) and the load's
	note         string
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

func median[T int64 | float64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// reportSSE prints the sse section and reports whether both its targets
// were met by the median over the rounds.
func reportSSE(res []sseResult, events int, gap time.Duration, ttfbN int) bool {
	fmt.Printf("\n(sse) one stream of %d events, %s apart, per mode, both streams at once: one-way latency at dispatch (upstream's write to the client's read of the blank line); TTFB: request to first body byte, p50 of %d streams on a kept-alive connection (warm) and on new ones (cold), mode after mode\n\n", events, gap, ttfbN)
	fmt.Println("| round | mode | events | p50 | p99 | max | TTFB warm p50 | TTFB cold p50 | run-queue wait during the streams | note |\n|---:|---|---:|---:|---:|---:|---:|---:|---|---|")
	byRound := map[int]map[string]sseResult{}
	for _, r := range res {
		if byRound[r.round] == nil {
			byRound[r.round] = map[string]sseResult{}
		}
		byRound[r.round][r.mode] = r
		fmt.Printf("| %d | %s | %d/%d | %s | %s | %s | %s | %s | %s | %s |\n", r.round+1, r.mode, r.events, r.exp, ms(percentile(r.lat, .5)), ms(percentile(r.lat, .99)),
			ms(percentile(r.lat, 1)), ms(percentile(r.warm, .5)), ms(percentile(r.cold, .5)), r.runq, r.note)
	}
	var p50, p99, warm, cold, pair50, pair99 []time.Duration
	for round := 0; byRound[round] != nil; round++ {
		d, e := byRound[round]["direct"], byRound[round]["egressd"]
		if len(d.lat) == 0 || len(e.lat) == 0 || e.events != e.exp || d.events != d.exp || len(e.warm) == 0 || len(d.warm) == 0 {
			continue
		}
		p50 = append(p50, percentile(e.lat, .5)-percentile(d.lat, .5))
		p99 = append(p99, percentile(e.lat, .99)-percentile(d.lat, .99))
		warm = append(warm, percentile(e.warm, .5)-percentile(d.warm, .5))
		cold = append(cold, percentile(e.cold, .5)-percentile(d.cold, .5))
		var pair []time.Duration
		for i := range e.byID {
			if e.byID[i] >= 0 && d.byID[i] >= 0 {
				pair = append(pair, e.byID[i]-d.byID[i])
			}
		}
		slices.Sort(pair)
		pair50, pair99 = append(pair50, percentile(pair, .5)), append(pair99, percentile(pair, .99))
	}
	if len(p99) == 0 {
		fmt.Println("(sse) no complete round: FAIL")
		return false
	}
	list := func(v []time.Duration) string {
		s := make([]string, len(v))
		for i, x := range v {
			s[i] = fmt.Sprintf("%.3f", float64(x)/1e6)
		}
		return strings.Join(s, " ") + " ms"
	}
	okP99, okTTFB := median(p99) <= sseP99Line, median(warm) <= sseTTFBLine
	fmt.Printf("\n(sse) added p50 latency per round: %s — median %s\n", list(p50), ms(median(p50)))
	fmt.Printf("(sse) added p99 latency per round: %s — median %s, target <= %s: %s\n", list(p99), ms(median(p99)), ms(sseP99Line), verdict(okP99))
	fmt.Printf("(sse) per event, egressd's latency minus direct's for the same event id: p50 per round %s — median %s; p99 per round %s — median %s\n", list(pair50), ms(median(pair50)), list(pair99), ms(median(pair99)))
	fmt.Printf("(sse) added TTFB p50 (warm) per round: %s — median %s, target <= %s: %s\n", list(warm), ms(median(warm)), ms(sseTTFBLine), verdict(okTTFB))
	fmt.Printf("(sse) added TTFB p50 (cold, new tunnel) per round: %s — median %s (against %s: %s, for information)\n", list(cold), ms(median(cold)), ms(sseTTFBLine), verdict(median(cold) <= sseTTFBLine))
	return okP99 && okTTFB
}

// reportBulk prints the bulk section and reports whether its target was
// met, for every body, by the median ratio over the rounds.
func reportBulk(res []bulkResult, mib, write int, bodies []string) bool {
	fmt.Printf("\n(bulk) one %d MiB chunked answer in %d-byte writes per body, mode and round; CPU per GiB from /proc\n\n", mib, write)
	fmt.Println("| round | body | mode | MB/s | time | egressd CPU/GiB | load CPU/GiB | / direct | note |\n|---:|---|---|---:|---:|---:|---:|---:|---|")
	type key struct {
		round int
		body  string
	}
	direct := map[key]float64{}
	for _, r := range res {
		if r.mode == "direct" {
			direct[key{r.round, r.body}] = r.mbps
		}
	}
	ratios := map[string][]float64{}
	cpus := map[string][]time.Duration{}
	mbps := map[string][]float64{}
	for _, r := range res {
		ratio, cpu := "—", "—"
		mbps[r.body+" "+r.mode] = append(mbps[r.body+" "+r.mode], r.mbps)
		if d := direct[key{r.round, r.body}]; d > 0 && r.mode != "direct" && r.mbps > 0 {
			ratio = fmt.Sprintf("%.2f×", r.mbps/d)
			ratios[r.body] = append(ratios[r.body], r.mbps/d)
			cpus[r.body] = append(cpus[r.body], r.cpu)
		}
		if r.cpu > 0 {
			cpu = fmt.Sprintf("%d ms", r.cpu.Milliseconds())
		}
		fmt.Printf("| %d | %s | %s | %.0f | %.2f s | %s | %d ms | %s | %s |\n", r.round+1, r.body, r.mode, r.mbps, r.took.Seconds(), cpu, r.loadCPU.Milliseconds(), ratio, r.note)
	}
	pass := true
	fmt.Println()
	for _, b := range bodies {
		if len(ratios[b]) == 0 {
			fmt.Printf("(bulk %s) no complete round: FAIL\n", b)
			pass = false
			continue
		}
		s := make([]string, len(ratios[b]))
		for i, x := range ratios[b] {
			s[i] = fmt.Sprintf("%.2f", x)
		}
		ok := median(ratios[b]) >= bulkLine
		pass = pass && ok
		fmt.Printf("(bulk %s) direct median %.0f MB/s, egressd median %.0f MB/s; egressd / direct per round: %s — median %.2f×, target >= %.1f×: %s; egressd CPU median %d ms/GiB\n",
			b, median(mbps[b+" direct"]), median(mbps[b+" egressd"]), strings.Join(s, " "), median(ratios[b]), bulkLine, verdict(ok), median(cpus[b]).Milliseconds())
	}
	return pass
}

// reportStreams prints the streams section and reports whether its
// target was met.
func reportStreams(r streamsResult, gap time.Duration) bool {
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	fmt.Printf("\n(streams) %d streams through egressd over %d invocations (%d each), an event every %s each, held %s; VmRSS sampled every second (%d samples)\n\n",
		r.streams, (r.streams+streamsPerInvocation-1)/streamsPerInvocation, streamsPerInvocation, gap, r.dur, r.samples)
	fmt.Println("| process | idle | peak with streams | peak above idle | after close |\n|---|---:|---:|---:|---:|")
	fmt.Printf("| egressd | %s | %s | **%s** | %s |\n", mib(r.idle), mib(r.peak), mib(r.peak-r.idle), mib(r.after))
	fmt.Printf("| upstreams' child (Go HTTPS server, same streams) | %s | %s | %s | — |\n", mib(r.upIdle), mib(r.upPeak), mib(r.upPeak-r.upIdle))
	fmt.Printf("\n(streams) opened %d of %d; %d events, one-way latency p50 %s p99 %s max %s", r.opened, r.streams, r.events,
		ms(percentile(r.lat, .5)), ms(percentile(r.lat, .99)), ms(percentile(r.lat, 1)))
	if r.firstErr != "" {
		fmt.Printf("; first error: %s", r.firstErr)
	}
	for _, p := range r.profiles {
		fmt.Printf("\n(streams) pprof %s", p)
	}
	ok := r.opened == r.streams && r.peak-r.idle <= streamsLine
	fmt.Printf("\n(streams) egressd peak VmRSS above idle %s, target <= %s (and every stream open): %s\n", mib(r.peak-r.idle), mib(streamsLine), verdict(ok))
	return ok
}
