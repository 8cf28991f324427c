package audit

import (
	"context"
	"testing"

	"hostkit.dev/lib/redact"
)

// BenchmarkAppend measures one typical record (a lease op with a few
// fields) without fsync, through the scrubber with 16 registered values.
func BenchmarkAppend(b *testing.B) {
	s := redact.NewScrubber()
	for i := 0; i < 16; i++ {
		s.Register([]byte("registered-secret-value-" + string(rune('a'+i))))
	}
	l, err := Open(Options{Dir: b.TempDir(), Daemon: "secretd", Fsync: FsyncNever, Scrubber: s})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	r := Record{Actor: Actor{UID: 0, PID: 42}, Op: "lease.stage", Outcome: OutcomeOK, Corr: "c-1",
		Fields: map[string]any{"cred": "demo-api", "invocation": "0f9e2c1a-8b7d-4c3e-9f10-2a3b4c5d6e7f", "handle_fp": "0123456789ab", "ttl_ms": int64(600000)}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Append(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendFsyncParallel measures appends with FsyncAlways from
// concurrent writers: group commit lets them share fsyncs.
func BenchmarkAppendFsyncParallel(b *testing.B) {
	l, err := Open(Options{Dir: b.TempDir(), Daemon: "egressd", Fsync: FsyncAlways})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	r := Record{Op: "egress.request", Outcome: OutcomeOK, Fields: map[string]any{"origin": "https://api.example.com", "status": 200}}
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Append(context.Background(), r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
