package redact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func benchScrubber() *Scrubber {
	s := NewScrubber()
	for i := range 16 {
		s.Register(fmt.Appendf(nil, "secret-value-%02d-%x", i, i*7919))
	}
	return s
}

func BenchmarkScrubNoMatch(b *testing.B) {
	s := benchScrubber()
	text := strings.Repeat("GET https://api.example.com/v1/items?page=2 status=200 bytes=5123 ", 16)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Scrub(text)
	}
}

// BenchmarkContainsDecoded: a pretty-printed JSON answer (newlines, \u
// and %XX escapes, '+' and '=' in it) without a held value: the cost of
// the decoded-view check on every answer body that has such bytes.
func BenchmarkContainsDecoded(b *testing.B) {
	s := benchScrubber()
	line := `  {"name": "caf\u00e9 & bar", "url": "https://x.test/a%20b?c=d+e", "n": 12345},` + "\n"
	text := []byte("[\n" + strings.Repeat(line, 64<<10/len(line)) + "]\n")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if s.ContainsDecoded(text) {
			b.Fatal("found a value that is not there")
		}
	}
}

func BenchmarkHandler(b *testing.B) {
	s := benchScrubber()
	l := slog.New(NewHandler(slog.NewJSONHandler(io.Discard, nil), s)).With("daemon", "egressd")
	err := fmt.Errorf("upstream: %w", io.ErrUnexpectedEOF)
	b.ReportAllocs()
	for b.Loop() {
		l.Info("egress.decision", "invocation", "3f2c", "origin", "https://api.example.com",
			"status", 200, "bytes", 5123, "err", err, "authorization", "x")
	}
}

func BenchmarkHandlerClean(b *testing.B) {
	s := benchScrubber()
	l := slog.New(NewHandler(slog.NewJSONHandler(io.Discard, nil), s)).With("daemon", "egressd")
	b.ReportAllocs()
	for b.Loop() {
		l.Info("egress.decision", "decision", "allow", "reason", "ok", "invocation", "3f2c", "method", "GET",
			"origin", "https://api.example.com", "path", "/v1/items", "address", "93.184.216.34:443",
			"attached", 1, "status", 200, "bytes_out", 120, "bytes_in", 5123, "duration_ms", 3)
	}
}

// nopHandler is an inner handler that does nothing, so that a benchmark
// measures the redacting handler alone.
type nopHandler struct{}

func (nopHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (nopHandler) Handle(context.Context, slog.Record) error { return nil }
func (h nopHandler) WithAttrs([]slog.Attr) slog.Handler      { return h }
func (h nopHandler) WithGroup(string) slog.Handler           { return h }

// BenchmarkHandlerDecisionOnly measures the redacting handler's own work
// on egressd's decision line (built as pipeline.finish builds it), with
// four registered credentials and an inner handler that does nothing.
func BenchmarkHandlerDecisionOnly(b *testing.B) {
	s := NewScrubber()
	for _, n := range []int{40, 28, 36, 20} { // four canaries of credential-like lengths, made now
		s.Register(benchCanary(b, n))
	}
	h := NewHandler(nopHandler{}, s)
	ctx := context.Background()
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		r := slog.NewRecord(now, slog.LevelInfo, "egress.decision", 0)
		r.AddAttrs(slog.String("decision", "allow"), slog.String("reason", "ok"), slog.String("invocation", "inv-3f2c9a"),
			slog.String("method", "GET"), slog.String("origin", "https://api.github.com"),
			slog.String("path", "/repos/hostkit/hostkit/pulls?state=open&per_page=50"), slog.String("address", "140.82.112.6:443"),
			slog.Int("attached", 1), slog.Int("status", 200), slog.Uint64("bytes_out", 120), slog.Uint64("bytes_in", 5123),
			slog.Int64("duration_ms", 3), slog.String("corr", "c-9f1e2d"))
		if err := h.Handle(ctx, r); err != nil {
			b.Fatal(err)
		}
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
