package redact

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
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
