package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// monoNow returns CLOCK_MONOTONIC in nanoseconds. It is one clock for
// every process on the machine (clock_gettime(2)) and is never stepped,
// so a stamp the upstreams' child writes into an event and the time the
// client (this process) reads it subtract into the event's one-way
// latency.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// streamHandler serves the streaming paths of the credentialed upstream
// (the caller has checked the credential):
//
//	/sse?n=N&size=B&gap=D   N server-sent events of B bytes each, D apart
//	                        on the server's clock (absolute schedule, no
//	                        drift), each flushed as it is written
//	/bulk?mib=M&write=W&body=K
//	                        M MiB of body K (see body), chunked, in writes
//	                        of W bytes, no Content-Length
//	/hold?gap=D&dur=T       an event every D (from a random phase) for T,
//	                        or until the client goes away
//
// Every event is "id: I\ndata: STAMP PAD\n\n", STAMP being monoNow when
// it is written. It reports whether it served the path.
func streamHandler(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	num := func(k string, def int) int {
		if v, err := strconv.Atoi(q.Get(k)); err == nil {
			return v
		}
		return def
	}
	dur := func(k string, def time.Duration) time.Duration {
		if v, err := time.ParseDuration(q.Get(k)); err == nil {
			return v
		}
		return def
	}
	switch r.URL.Path {
	case "/sse":
		n, size, gap := num("n", 1000), num("size", 200), dur("gap", 5*time.Millisecond)
		sseHeader(w)
		start := time.Now()
		for i := range n {
			if d := time.Until(start.Add(time.Duration(i) * gap)); d > 0 {
				time.Sleep(d)
			}
			if !writeEvent(w, i, size) {
				return true
			}
		}
	case "/bulk":
		mib, write := num("mib", 1024), num("write", 64<<10)
		pat := body(q.Get("body"), 1<<20+write)
		w.Header().Set("Content-Type", "application/octet-stream")
		for left, off := mib<<20, 0; left > 0; left, off = left-write, (off+write)%(1<<20) {
			if _, err := w.Write(pat[off : off+min(write, left)]); err != nil {
				return true
			}
		}
	case "/hold":
		gap, total := dur("gap", 3*time.Second), dur("dur", time.Minute)
		sseHeader(w)
		end := time.Now().Add(total)
		if !writeEvent(w, 0, 200) {
			return true
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(gap))))
		defer t.Stop()
		for i := 1; time.Now().Before(end); i++ {
			select {
			case <-r.Context().Done():
				return true
			case <-t.C:
			}
			if !writeEvent(w, i, 200) {
				return true
			}
			t.Reset(gap)
		}
	default:
		return false
	}
	return true
}

func sseHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
}

// writeEvent writes and flushes event i, padded to size bytes; it reports
// whether the write succeeded.
func writeEvent(w http.ResponseWriter, i, size int) bool {
	ev := fmt.Appendf(nil, "id: %d\ndata: %d ", i, monoNow())
	for j := 0; len(ev) < size-2; j++ {
		ev = append(ev, 'a'+byte(j%26))
	}
	ev = append(ev, "\n\n"...)
	if _, err := w.Write(ev); err != nil {
		return false
	}
	return http.NewResponseController(w).Flush() == nil
}

// body returns n bytes of a bulk body of kind k, the same on every call:
//
//	text    pseudo-random printable ASCII in words and lines (a text or
//	        base64-ish dump: every byte may begin a form of a value)
//	json    a streamed chat answer, server-sent events of JSON chunks with
//	        escapes (lib/redact's sseBody)
//	binary  pseudo-random bytes (a compressed archive)
func body(k string, n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 0, n+512)
	switch k {
	case "json":
		for i := 0; len(b) < n; i++ {
			b = fmt.Appendf(b, `data: {"id":"chatcmpl-%d","object":"chat.completion.chunk","created":1733100000,`+
				`"choices":[{"index":0,"delta":{"content":"token %d: caf\u00e9 \"quoted\" 50%% a+b\n"},"finish_reason":null}]}`+"\n\n", i%977, i)
		}
	case "binary":
		for len(b) < n {
			b = binary.LittleEndian.AppendUint64(b, r.Uint64())
		}
	default:
		const alpha = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789,.:\"{}"
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
	}
	return b[:n]
}
