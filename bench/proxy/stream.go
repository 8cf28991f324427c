package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The streaming sections (sse, bulk, streams) ask the credentialed
// upstream (up.test, streamHandler) through an intercepted tunnel with
// the placeholder in Authorization, as (c) does, or directly over HTTPS.

// sseResult is one mode's run of the sse section: the one-way latency of
// every event of one long stream, and the time to first byte of several
// short streams over a kept-alive connection (warm) and over a new
// connection each (cold: for egressd that includes CONNECT and both TLS
// handshakes).
type sseResult struct {
	mode        string
	round       int
	lat         []time.Duration // sorted
	warm, cold  []time.Duration // sorted
	events, exp int
	note        string
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
// event's stamp at its dispatch: when the blank line that ends it has
// been read, as an SSE client (WHATWG HTML, "server-sent events")
// dispatches it. It returns the number of events.
func readEvents(r io.Reader, got func(stamp int64)) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	n, stamp := 0, int64(-1)
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
				got(stamp)
				n++
			}
			stamp = -1
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			if i := bytes.IndexByte(v, ' '); i > 0 {
				stamp, _ = strconv.ParseInt(string(v[:i]), 10, 64)
			}
		}
	}
}

// sseRun runs the sse section for one mode: a stream of events events of
// size bytes, gap apart, then ttfbN short streams (3 events) on the same
// connection and ttfbN on new connections, timing the first body byte.
func sseRun(mode, proxy, base, auth string, roots *x509.CertPool, events, size int, gap time.Duration, ttfbN int) sseResult {
	res := sseResult{mode: mode, exp: events}
	ctx := context.Background()
	c := client(proxy, roots, 1)
	defer c.CloseIdleConnections()
	short := base + "/sse?n=3&size=200&gap=5ms"
	// Warm-up: the tunnel, both handshakes and the leaf certificate.
	if resp, err := get(ctx, c, short, auth); err != nil {
		res.note = err.Error()
		return res
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := get(ctx, c, fmt.Sprintf("%s/sse?n=%d&size=%d&gap=%s", base, events, size, gap), auth)
	if err != nil {
		res.note = err.Error()
		return res
	}
	res.events, err = readEvents(resp.Body, func(stamp int64) {
		res.lat = append(res.lat, time.Duration(monoNow()-stamp))
	})
	resp.Body.Close()
	if err != nil {
		res.note = err.Error()
	}
	first := func(c *http.Client) (time.Duration, error) {
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
	for range ttfbN {
		d, err := first(c)
		if err != nil {
			res.note = "ttfb: " + err.Error()
			break
		}
		res.warm = append(res.warm, d)
		fresh := client(proxy, roots, 1)
		d, err = first(fresh)
		fresh.CloseIdleConnections()
		if err != nil {
			res.note = "ttfb (cold): " + err.Error()
			break
		}
		res.cold = append(res.cold, d)
	}
	for _, s := range [][]time.Duration{res.lat, res.warm, res.cold} {
		slices.Sort(s)
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
