//go:build !linux

package redact

import "time"

// threadCPU is 0 where the thread's CPU time is not read: the
// benchmarks then report no cpu-ns/B.
func threadCPU() time.Duration { return 0 }
