package redact

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// sseBody is n bytes of a streamed chat answer (server-sent events of
// JSON chunks, with escapes) that holds no registered value.
func sseBody(n int) []byte {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-%d","object":"chat.completion.chunk","created":1733100000,`+
			`"choices":[{"index":0,"delta":{"content":"token %d: caf\u00e9 \"quoted\" 50%% a+b\n"},"finish_reason":null}]}`+"\n\n", i%977, i)
	}
	return []byte(b.String()[:n])
}

// textBody is n bytes of pseudo-random printable ASCII in words and
// lines, as bench/proxy's text body: hex digits, hex separators and the
// first bytes of base64 forms are everywhere, escapes nowhere.
func textBody(n int) []byte {
	const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,.:\"{}"
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 0, n)
	for len(b) < n {
		switch x := r.IntN(80); {
		case x == 0:
			b = append(b, '\n')
		case x < 12:
			b = append(b, ' ')
		default:
			b = append(b, alpha[r.IntN(len(alpha))])
		}
	}
	return b
}

// binaryBody is n pseudo-random bytes (a compressed download): escapes,
// line breaks and UTF-8 leads start everywhere.
func binaryBody(n int) []byte {
	body := make([]byte, n)
	x := uint64(0x9E3779B97F4A7C15)
	for i := range body {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		body[i] = byte(x)
	}
	return body
}

// benchStream runs body through a Stream of benchScrubber's values in
// pieces of n bytes.
func benchStream(b *testing.B, body []byte, n int) { benchStreamOf(b, benchScrubber(), body, n) }

// benchStreamOf runs body through a Stream of s in pieces of n bytes.
func benchStreamOf(b *testing.B, s *Scrubber, body []byte, n int) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	out := make([]byte, 0, len(body))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu := threadCPU()
	for b.Loop() {
		st := s.NewStream()
		out = out[:0]
		var err error
		for i := 0; i < len(body); i += n {
			if out, err = st.Next(out, body[i:min(i+n, len(body))]); err != nil {
				b.Fatal(err)
			}
		}
		if out, err = st.Close(out); err != nil || len(out) != len(body) {
			b.Fatal(err, len(out))
		}
	}
	reportCPU(b, cpu, len(body))
}

// reportCPU reports the benchmark thread's CPU time per byte since cpu
// (threadCPU), for b.N runs over n bytes each.
func reportCPU(b *testing.B, cpu time.Duration, n int) {
	if cpu == 0 {
		return
	}
	b.ReportMetric(float64(threadCPU()-cpu)/float64(b.N)/float64(n), "cpu-ns/B")
}

// BenchmarkStream: a 4 MiB answer in 16 KiB pieces.
func BenchmarkStream(b *testing.B) { benchStream(b, sseBody(4<<20), 16<<10) }

// BenchmarkStreamBytewise: an answer one byte at a time, 256 KiB and
// 1 MiB: the same MB/s for both (no rescanning of what is held, nothing
// quadratic), below BenchmarkStream's by the cost of a call per byte.
func BenchmarkStreamBytewise(b *testing.B) {
	for _, n := range []int{256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) { benchStream(b, sseBody(n), 1) })
	}
}

// BenchmarkStreamBuffered is what a Stream replaces: the whole 4 MiB
// answer through ScrubBytes, then ContainsDecoded.
func BenchmarkStreamBuffered(b *testing.B) {
	s := benchScrubber()
	body := sseBody(4 << 20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if out := s.ScrubBytes(body); s.ContainsDecoded(out) {
			b.Fatal("echo")
		}
	}
}

// BenchmarkDetector: a 4 MiB request body in 16 KiB pieces.
func BenchmarkDetector(b *testing.B) {
	s := benchScrubber()
	body := sseBody(4 << 20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d := s.NewDetector()
		for i := 0; i < len(body); i += 16 << 10 {
			if _, hit := d.Next(body[i:min(i+16<<10, len(body))]); hit {
				b.Fatal("hit")
			}
		}
		if _, hit := d.Close(); hit {
			b.Fatal("hit")
		}
	}
}

// BenchmarkStreamBinary: 4 MiB of pseudo-random bytes (a download) in
// 32 KiB pieces: escapes and line breaks start everywhere.
func BenchmarkStreamBinary(b *testing.B) { benchStream(b, binaryBody(4<<20), 32<<10) }

// BenchmarkStreamText: 4 MiB of random printable words and lines in
// 32 KiB pieces: hex digits and separators, and bytes that begin base64
// forms, everywhere.
func BenchmarkStreamText(b *testing.B) { benchStream(b, textBody(4<<20), 32<<10) }

// BenchmarkStreamOne: the three bodies of bench/proxy's bulk section, 4
// MiB each in 32 KiB pieces, against the one value that benchmark's
// egressd holds (bench/proxy's credential) instead of benchScrubber's
// sixteen: which bytes wake a lane, and so which bytes the fast path
// must look at twice, depend on the values' forms.
func BenchmarkStreamOne(b *testing.B) {
	bodies := []struct {
		name string
		body []byte
	}{{"sse", sseBody(4 << 20)}, {"text", textBody(4 << 20)}, {"binary", binaryBody(4 << 20)}}
	for _, x := range bodies {
		b.Run(x.name, func(b *testing.B) {
			s := NewScrubber()
			s.Register([]byte("bench-secret-value-0123456789"))
			benchStreamOf(b, s, x.body, 32<<10)
		})
	}
}
