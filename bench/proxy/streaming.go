package main

import (
	"os"
	"time"
)

// streamingCfg are the flags of the sse and bulk sections.
type streamingCfg struct {
	sse, bulk                   bool
	sseEvents, sseSize, sseTTFB int
	sseGap                      time.Duration
	bulkMiB, bulkWrite          int
	bulkBodies                  []string
	perfDir                     string // -perf: profile egressd during its measured parts
}

// streamingRound runs one round of the sse and bulk sections, direct
// first in even rounds, egressd first in odd ones (want picks the modes
// of bulk; sse always runs both, at once).
func streamingRound(round int, cfg streamingCfg, eg *egressdProc, up *upstreams, base string, want func(string) bool,
	loadCPU func() time.Duration) (sses []sseResult, bulks []bulkResult) {
	modes := []string{"direct", "egressd"}
	if round%2 == 1 {
		modes = []string{"egressd", "direct"}
	}
	if cfg.sse {
		var ts []sseTarget
		for _, m := range modes {
			if m == "egressd" {
				ts = append(ts, sseTarget{m, eg.proxyURL("benchc"), "Bearer " + eg.placeholder, eg.pool})
			} else {
				ts = append(ts, sseTarget{m, "", "Bearer " + secret, up.pool})
			}
		}
		stop := profile(cfg.perfDir, "sse", "egressd", eg.pid(), time.Duration(cfg.sseEvents)*cfg.sseGap)
		sses = append(sses, sseRound(round, ts, base, cfg.sseEvents, cfg.sseSize, cfg.sseGap, cfg.sseTTFB,
			map[string]int{"egressd": eg.pid(), "client": os.Getpid(), "upstreams": up.pid()})...)
		stop()
	}
	for _, m := range modes {
		if !want(m) {
			continue
		}
		proxy, auth, roots := "", "Bearer "+secret, up.pool
		if m == "egressd" {
			proxy, auth, roots = eg.proxyURL("benchc"), "Bearer "+eg.placeholder, eg.pool
		}
		for _, kind := range cfg.bulkBodies {
			if !cfg.bulk {
				break
			}
			pid := 0
			if m == "egressd" {
				pid = eg.pid()
			}
			stop := profile(cfg.perfDir, "bulk-"+kind, m, pid, 5*time.Second)
			cpu0, self0 := cpuTime(pid), loadCPU()
			mbps, took, err := bulkRun(proxy, base, auth, roots, cfg.bulkMiB, cfg.bulkWrite, kind)
			stop()
			gib := float64(cfg.bulkMiB) / 1024
			r := bulkResult{mode: m, body: kind, round: round, mbps: mbps, took: took,
				cpu: time.Duration(float64(cpuTime(pid)-cpu0) / gib), loadCPU: time.Duration(float64(loadCPU()-self0) / gib)}
			if err != nil {
				r.note = err.Error()
			}
			bulks = append(bulks, r)
		}
	}
	return sses, bulks
}
