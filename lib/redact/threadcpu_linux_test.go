package redact

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used, or 0
// when it cannot tell. The benchmarks that report cpu-ns/B lock their
// goroutine to its thread: on a machine other work keeps busy, wall
// time per op measures the neighbours, CPU time the code.
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD, getrusage(2)
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
