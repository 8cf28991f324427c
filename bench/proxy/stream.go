package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The streaming sections (sse, bulk, streams) ask the credentialed
// upstream (up.test, streamHandler) through an intercepted tunnel with
// the placeholder in Authorization, as (c) does, or directly over HTTPS.

// sseResult is one mode's part of a round of the sse section: the one-way
// latency of every event of one long stream, run at the same time as the
// other mode's (so that a stall of the loaded machine falls on both),
// and the time to first byte of several short streams over a kept-alive
// connection (warm) and over a new connection each (cold: for egressd
// that includes CONNECT and both TLS handshakes).
type sseResult struct {
	mode        string
	round       int
	lat         []time.Duration // sorted
	byID        []time.Duration // by event id; -1: not received
	warm, cold  []time.Duration // sorted
	events, exp int
	runq        string // the processes' run-queue wait during the round's streams
	note        string
}

// sseTarget is how one mode reaches the upstream.
type sseTarget struct {
	mode, proxy, auth string
	roots             *x509.CertPool
}

// get asks url with Authorization auth; the caller closes the body.
func get(ctx context.Context, c *http.Client, url, auth string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", auth)
	resp, err := c.Do(req)
	if err == nil && resp.StatusCode != 200 {
		resp.Body.Close()
		err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp, err
}

// readEvents reads server-sent events from r and calls got with each
// event's id and stamp at its dispatch: when the blank line that ends it
// has been read, as an SSE client (WHATWG HTML, "server-sent events")
// dispatches it. It returns the number of events.
func readEvents(r io.Reader, got func(id int, stamp int64)) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	n, id, stamp := 0, -1, int64(-1)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return n, err
		}
		if len(line) == 1 {
			if stamp >= 0 {
				got(id, stamp)
				n++
			}
			id, stamp = -1, -1
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
			id, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		} else if v, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			if i := bytes.IndexByte(v, ' '); i > 0 {
				stamp, _ = strconv.ParseInt(string(v[:i]), 10, 64)
			}
		}
	}
}

// sseRound runs one round of the sse section: after a warm-up request
// per target (the tunnel, both handshakes, the leaf certificate), one
// stream of events events of size bytes, gap apart, per target, all at
// once; then, target after target in the order given, ttfbN short
// streams (3 events) on the kept-alive connection and ttfbN on new ones,
// timing the first body byte. pids names the processes whose run-queue
// wait (runqWait) during the long streams the results carry.
func sseRound(round int, ts []sseTarget, base string, events, size int, gap time.Duration, ttfbN int, pids map[string]int) []sseResult {
	ctx := context.Background()
	short := base + "/sse?n=3&size=200&gap=5ms"
	res := make([]sseResult, len(ts))
	clients := make([]*http.Client, len(ts))
	for i, t := range ts {
		res[i] = sseResult{mode: t.mode, round: round, exp: events, byID: make([]time.Duration, events)}
		clients[i] = client(t.proxy, t.roots, 1)
		defer clients[i].CloseIdleConnections()
		for j := range res[i].byID {
			res[i].byID[j] = -1
		}
		if resp, err := get(ctx, clients[i], short, t.auth); err != nil {
			res[i].note = err.Error()
		} else {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	names := slices.Sorted(maps.Keys(pids))
	wait0 := make([]time.Duration, len(names))
	for i, n := range names {
		wait0[i] = runqWait(pids[n])
	}
	var wg sync.WaitGroup
	for i, t := range ts {
		if res[i].note != "" {
			continue
		}
		r := &res[i]
		wg.Go(func() {
			resp, err := get(ctx, clients[i], fmt.Sprintf("%s/sse?n=%d&size=%d&gap=%s", base, events, size, gap), t.auth)
			if err != nil {
				r.note = err.Error()
				return
			}
			defer resp.Body.Close()
			r.events, err = readEvents(resp.Body, func(id int, stamp int64) {
				d := time.Duration(monoNow() - stamp)
				r.lat = append(r.lat, d)
				if id >= 0 && id < len(r.byID) {
					r.byID[id] = d
				}
			})
			if err != nil {
				r.note = err.Error()
			}
		})
	}
	wg.Wait()
	var waits []string
	for i, n := range names {
		waits = append(waits, fmt.Sprintf("%s %.0f", n, float64(runqWait(pids[n])-wait0[i])/1e6))
	}
	for i := range res {
		res[i].runq = strings.Join(waits, ", ") + " ms"
	}
	first := func(c *http.Client, auth string) (time.Duration, error) {
		t0 := monoNow()
		resp, err := get(ctx, c, short, auth)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var b [1]byte
		if _, err := io.ReadFull(resp.Body, b[:]); err != nil {
			return 0, err
		}
		d := time.Duration(monoNow() - t0)
		_, err = io.Copy(io.Discard, resp.Body)
		return d, err
	}
	for i, t := range ts {
		r := &res[i]
		for range ttfbN {
			if r.note != "" {
				break
			}
			d, err := first(clients[i], t.auth)
			if err != nil {
				r.note = "ttfb: " + err.Error()
				break
			}
			r.warm = append(r.warm, d)
			fresh := client(t.proxy, t.roots, 1)
			d, err = first(fresh, t.auth)
			fresh.CloseIdleConnections()
			if err != nil {
				r.note = "ttfb (cold): " + err.Error()
				break
			}
			r.cold = append(r.cold, d)
		}
		for _, s := range [][]time.Duration{r.lat, r.warm, r.cold} {
			slices.Sort(s)
		}
	}
	return res
}

// bulkRun downloads base/bulk (mib MiB of body kind, chunked, in writes
// of write bytes) once and returns MB/s (1 MB = 2^20 bytes) and the time
// taken.
func bulkRun(proxy, base, auth string, roots *x509.CertPool, mib, write int, kind string) (float64, time.Duration, error) {
	c := client(proxy, roots, 1)
	defer c.CloseIdleConnections()
	start := time.Now()
	resp, err := get(context.Background(), c, fmt.Sprintf("%s/bulk?mib=%d&write=%d&body=%s", base, mib, write, kind), auth)
	if err != nil {
		return 0, 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if err == nil && n != int64(mib)<<20 {
		err = fmt.Errorf("got %d bytes, want %d", n, int64(mib)<<20)
	}
	if err != nil {
		return 0, took, err
	}
	return float64(mib) / took.Seconds(), took, nil
}

// percentile returns the p-th (0..1) of sorted d, or 0 when it is empty.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[int(p*float64(len(d)-1))]
}

// collector gathers durations from many goroutines.
type collector struct {
	mu sync.Mutex
	d  []time.Duration
}

func (c *collector) add(d []time.Duration) {
	c.mu.Lock()
	c.d = append(c.d, d...)
	c.mu.Unlock()
}
