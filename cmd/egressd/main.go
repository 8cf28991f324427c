// Command egressd is hostkit's egressd daemon (docs/design.md, "The
// binaries"); its logic is in run.go and internal/.
package main

import (
	"os"
	"runtime/debug"

	"hostkit.dev/lib/daemon"
)

// gcPercent is the GC target egressd runs with unless GOGC is set: its live
// heap is usually small (bundles, pooled connections, in-flight bodies)
// and every proxied request allocates a few kilobytes, so the default of
// 100 costs ~7 % more CPU per request (bench/proxy (a), 2026-11-29); 400
// lets the heap grow to five times the live heap instead of twice.
const gcPercent = 400

// memLimit is the soft memory limit (bytes) that bounds what gcPercent
// lets the heap grow to, unless GOMEMLIMIT is set: past it the collector
// runs as often as it must (runtime/debug.SetMemoryLimit).
const memLimit = 512 << 20

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memLimit)
	}
	daemon.Main("egressd", run)
}
