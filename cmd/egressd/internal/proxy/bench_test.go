package proxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/redact"
)

// BenchmarkProxyPlain measures one absolute-form plain-HTTP request
// through the proxy face, in process, as bench/proxy (a) sends them: the
// whole pipeline with its two audit records (FsyncNever) and the decision
// line (to io.Discard through the redacting handler), against an upstream
// that answers 64 bytes from a canned reply, over one kept-alive client
// connection. It reports allocations per request, which the load runs
// cannot isolate; the CPU figures come from bench/proxy.
func BenchmarkProxyPlain(b *testing.B) {
	up := cannedUpstream(b, "HTTP/1.1 200 OK\r\nContent-Length: 64\r\nContent-Type: text/plain\r\n\r\n"+strings.Repeat("x", 64))
	sc := redact.NewScrubber()
	sc.Register([]byte("bench-secret-value-0123456789"))
	al, err := audit.Open(audit.Options{Dir: b.TempDir(), Daemon: "egressd", Scrubber: sc, Fsync: audit.FsyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer al.Close()
	log := daemon.NewLogger(io.Discard, slog.LevelInfo, sc, "egressd")
	reg := bundle.NewRegistry(nil, sc)
	tok := strings.Repeat("a", 43)
	if _, err := reg.Register(context.Background(), &egressdapi.BundleRegisterRequest{Invocation: "bench", ProxyToken: tok,
		Policy: egressdapi.Policy{Allow: []egressdapi.AllowRule{{Origin: "http://" + up}}}}); err != nil {
		b.Fatal(err)
	}
	tr := transport.New(transport.Config{})
	defer tr.Close()
	p := pipeline.New(pipeline.Config{Registry: reg, Transport: tr, Audit: al, Logger: log})
	srv := New(Config{Registry: reg, Pipeline: p, Transport: tr, Audit: al, Logger: log})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l, "tcp")
	defer srv.Close()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte(fmt.Sprintf("GET http://%s/bench HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n",
		up, up, base64.StdEncoding.EncodeToString([]byte("bench:"+tok))))
	br := bufio.NewReader(c)
	one := func() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	one() // dial the upstream
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	for range b.N {
		one()
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	// Everything in this process: the client side (one ReadResponse) and
	// the canned upstream (one read) are included, and small.
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(b.N), "process-allocs/req")
}

// cannedUpstream answers every request on every connection with reply,
// without parsing more than the end of the request header.
func cannedUpstream(b *testing.B, reply string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	b.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
					}
					if _, err := io.WriteString(c, reply); err != nil {
						return
					}
				}
			})
		}
	})
	b.Cleanup(func() { l.Close() })
	return l.Addr().String()
}
