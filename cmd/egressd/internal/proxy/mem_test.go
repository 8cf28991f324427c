package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/redact"
)

// maxStreamBytes bounds what egressd holds per open streamed exchange
// that waits for its next event (an intercepted tunnel, a substituted
// credential, an SSE answer): live heap and goroutine stacks, the
// scrubber's state for one held value included (~33 KiB of it). It
// measured 92-95 KiB (~28 KiB of it the stacks of 4 goroutines), 108 KiB
// under the race detector; it was 217 KiB (250 KiB) when each stream held
// two 32 KiB copy buffers, four 16 KiB bufio buffers, and the stack its
// TLS handshake had grown. The bound leaves room for the runtime's
// variations, not for another 32 KiB buffer under the race detector.
const maxStreamBytes = 128 << 10

// maxEventBytes bounds what egressd allocates to relay one event of an
// open stream: with GOGC at 400 that garbage, not the live heap, is what
// sets the resident size of hundreds of long streams once they have run
// for minutes.
const maxEventBytes = 2 << 10

// TestStreamMemory opens streams through a real proxy face (CONNECT,
// TLS interception, the pipeline with substitution, a TLS upstream that
// sends one event and waits) and measures, after collections, the live
// heap and stacks they add; the same streams opened directly to the
// upstream are subtracted, so the figure is egressd's share (its
// connections both ways, goroutines, buffers, pipeline state) and not
// the client's or the upstream's. Not parallel: it reads the process's
// memory statistics.
func TestStreamMemory(t *testing.T) {
	const (
		n      = 40
		events = 20 // per stream, after the first
		secret = "mem-secret-value-0123456789"
		ph     = "hkp_abcdefghijklmnopqrstuvwxyz234567"
	)
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	upLeaf, err := ca.Leaf("up.test")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var ticks [n]chan struct{} // stream i's next event
	for i := range ticks {
		ticks[i] = make(chan struct{})
	}
	var active atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		i, _ := strconv.Atoi(r.URL.Query().Get("i"))
		active.Add(1)
		defer active.Add(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"n\":0}\n\n")
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			case <-ticks[i]:
				io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"more words of an answer\"}}]}\n\n")
				w.(http.Flusher).Flush()
			}
		}
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{*upLeaf}, NextProtos: []string{"http/1.1"}}
	up.StartTLS()
	defer up.Close()
	defer close(stop)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	authority := "up.test:" + port
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)

	sc := redact.NewScrubber()
	al, err := audit.Open(audit.Options{Dir: t.TempDir(), Daemon: "egressd", Scrubber: sc, Fsync: audit.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	logs := &egresstest.Buffer{}
	log := daemon.NewLogger(logs, slog.LevelInfo, sc, "egressd")
	cons := &egresstest.Consumer{Leases: []secretdapi.Lease{{Credential: "api", Destination: "https://" + authority, Placeholder: ph,
		Target: "header:Authorization", Template: "Bearer {}", Value: []byte(secret)}}}
	reg := bundle.NewRegistry(cons, sc)
	defer reg.DropAll()
	tok := strings.Repeat("m", 43)
	if _, err := reg.Register(context.Background(), &egressdapi.BundleRegisterRequest{Invocation: "mem", ProxyToken: tok,
		Handles: [][]byte{{1}}}); err != nil {
		t.Fatal(err)
	}
	tr := transport.New(transport.Config{HostMap: transport.HostMap{authority: netip.MustParseAddr("127.0.0.1")}, RootCAs: roots})
	defer tr.Close()
	p := pipeline.New(pipeline.Config{Registry: reg, Transport: tr, Owner: noOwner{}, Audit: al, Logger: log})
	srv := New(Config{Registry: reg, Pipeline: p, Transport: tr, CA: ca, Audit: al, Logger: log,
		MaxTunnelsPerInvocation: 2 * n, MaxRequestsPerInvocation: 2 * n, MaxStreamsPerInvocation: 2 * n})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { srv.Serve(l, "tcp"); close(served) }()
	defer func() { srv.Close(); <-served }()

	// open starts one stream and returns its connection once the first
	// event arrived: through egressd, or directly to the upstream.
	type stream struct {
		c    net.Conn
		body io.Reader
	}
	open := func(via bool, i int) stream {
		t.Helper()
		var raw net.Conn
		var err error
		ph := ph
		if via {
			raw, err = net.Dial("tcp", l.Addr().String())
			if err == nil {
				fmt.Fprintf(raw, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n",
					authority, authority, base64.StdEncoding.EncodeToString([]byte("mem:"+tok)))
				resp, rerr := http.ReadResponse(bufio.NewReaderSize(raw, 64), nil) // the 200 has no body: nothing read past it
				if rerr != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("CONNECT: %v %v", resp, rerr)
				}
			}
		} else {
			raw, err = net.Dial("tcp", up.Listener.Addr().String())
			ph = secret
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = raw.SetDeadline(time.Now().Add(30 * time.Second)) // only while it opens
		c := tls.Client(raw, &tls.Config{ServerName: "up.test", RootCAs: roots, NextProtos: []string{"http/1.1"}})
		fmt.Fprintf(c, "GET /events?i=%d HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", i, authority, ph)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get(HeaderError))
		}
		readEvent(t, resp.Body)
		_ = raw.SetDeadline(time.Time{})
		return stream{c, resp.Body}
	}
	// settle waits until the upstream serves want streams (closed ones
	// end on egressd's client watch, at once).
	settle := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); active.Load() != want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d upstream streams open, want %d", active.Load(), want)
			}
		}
	}
	// cost opens n streams and returns what they add per stream (live
	// heap and stacks after collections) and what relaying one more
	// event allocates, then closes them.
	cost := func(via bool) (perStream int64, goroutines float64, perEvent int64) {
		t.Helper()
		settle(0)
		h0, s0 := liveBytes()
		g0 := runtime.NumGoroutine()
		var a0, a1 runtime.MemStats
		runtime.ReadMemStats(&a0)
		streams := make([]stream, 0, n)
		for i := range n {
			streams = append(streams, open(via, i))
		}
		settle(n)
		runtime.ReadMemStats(&a1)
		h1, s1 := liveBytes()
		g1 := runtime.NumGoroutine()
		t.Logf("via egressd %v: heap %.1f KiB, stacks %.1f KiB per stream; %.1f KiB allocated to open one", via,
			float64(int64(h1)-int64(h0))/n/1024, float64(int64(s1)-int64(s0))/n/1024, float64(a1.TotalAlloc-a0.TotalAlloc)/n/1024)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range events {
			for i := range streams {
				ticks[i] <- struct{}{}
			}
			for _, st := range streams {
				_ = st.c.SetReadDeadline(time.Now().Add(30 * time.Second))
				readEvent(t, st.body)
			}
		}
		runtime.ReadMemStats(&m1)
		for _, st := range streams {
			st.c.Close()
		}
		settle(0)
		return (int64(h1+s1) - int64(h0+s0)) / n, float64(g1-g0) / n, int64(m1.TotalAlloc-m0.TotalAlloc) / (n * events)
	}
	// Warm-up: the leaf, the upstream's TLS session state, the pools.
	open(true, 0).c.Close()
	open(false, 0).c.Close()
	direct, gDirect, evDirect := cost(false)
	via, gVia, evVia := cost(true)
	share := via - direct
	t.Logf("per stream: via egressd %d B (%.1f goroutines), direct %d B (%.1f goroutines): egressd's share %.1f KiB, %.1f goroutines",
		via, gVia, direct, gDirect, float64(share)/1024, gVia-gDirect)
	t.Logf("allocated per event: via egressd %d B, direct %d B: egressd's share %d B", evVia, evDirect, evVia-evDirect)
	if evVia-evDirect > maxEventBytes && !raceEnabled {
		t.Errorf("egressd allocates %d B per event relayed, want at most %d", evVia-evDirect, maxEventBytes)
	}
	if share > maxStreamBytes {
		t.Errorf("egressd holds %.1f KiB per waiting stream, want at most %d KiB", float64(share)/1024, maxStreamBytes>>10)
	}
	if share <= 0 {
		t.Errorf("measured nothing (%d B): the streams did not go through egressd", share)
	}
	if strings.Contains(logs.String(), secret) {
		t.Error("the secret is in the log")
	}
}

// readEvent reads from body until an event's end (a blank line).
func readEvent(t *testing.T, body io.Reader) {
	t.Helper()
	var got []byte
	buf := make([]byte, 1)
	for !bytes.HasSuffix(got, []byte("\n\n")) {
		k, err := body.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			t.Fatalf("event: %q %v", got, err)
		}
	}
}

// liveBytes returns the live heap and the goroutine stacks in use, after
// two collections (the second empties sync.Pool's victim cache: a pooled
// buffer no stream holds is not counted).
func liveBytes() (heap, stacks uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.StackInuse
}
