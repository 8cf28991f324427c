package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

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

// BenchmarkEncodeEgress measures the CPU part of appending an egressd
// after record (the proxy's Fields and the pipeline's typed Attrs),
// without the write: Op, Code and Corr scrubbed, the tail encoded and
// scrubbed, the line framed, checked for registered values (four
// registered credentials) and hashed.
func BenchmarkEncodeEgress(b *testing.B) {
	s := redact.NewScrubber()
	for _, n := range []int{40, 28, 36, 20} { // four canaries of credential-like lengths, made now
		s.Register(benchCanary(b, n))
	}
	l, err := Open(Options{Dir: b.TempDir(), Daemon: "egressd", Fsync: FsyncNever, Scrubber: s})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	fields := map[string]any{"via": "tcp", "tunnel": "api.github.com:443"}
	attrs := []slog.Attr{slog.String("address", "140.82.112.6:443"), slog.Any("attached", []string{"gh"}),
		slog.Uint64("bytes_in", 5123), slog.Uint64("bytes_out", 120), slog.Int64("duration_ms", 3),
		slog.String("invocation", "inv-3f2c9a"), slog.String("method", "GET"), slog.String("origin", "https://api.github.com"),
		slog.String("path", "/repos/hostkit/hostkit/pulls?state=open&per_page=50"), slog.Int("status", 200)}
	tm := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	b.ReportAllocs()
	var buf, line []byte
	for b.Loop() {
		r := Record{Actor: Actor{UID: 1000, PID: 4242}, Op: "egress.request", Phase: PhaseAfter, Outcome: OutcomeOK,
			Corr: "c-9f1e2d", Fields: fields, Attrs: attrs}
		r.Op, r.Code, r.Corr = l.text(r.Op), l.text(r.Code), l.text(r.Corr)
		var ok bool
		if buf, ok = l.appendTail(buf[:0], &r, 41); !ok {
			b.Fatal("general path")
		}
		line, _ = appendHead(line[:0], 42, tm)
		line = appendPrev(append(line, buf...), ZeroPrev)
		if s.Contains(line) {
			b.Fatal("registered value")
		}
		_ = hashLine(line)
	}
}

// benchCanary is a random canary value of n bytes (hex), made at run
// time: nothing that looks like a real credential lives in the source.
func benchCanary(b *testing.B, n int) []byte {
	raw := make([]byte, (n+1)/2)
	if _, err := rand.Read(raw); err != nil {
		b.Fatal(err)
	}
	return []byte(hex.EncodeToString(raw)[:n])
}
