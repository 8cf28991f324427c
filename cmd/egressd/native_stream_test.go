//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// nativeFixture is secretd + egressd in front of api.test, an HTTPS
// upstream whose key (the canary) egressd injects into every request of
// inv-n at its staged target (header Authorization, "Bearer {}"), for
// egress.request_stream.
type nativeFixture struct {
	eg  *egressd
	url string // https://api.test:<port>

	mu    sync.Mutex
	auth  map[string]string        // path → the Authorization that reached the upstream
	ended map[string]time.Time     // path → when the upstream saw its request end
	gates map[string]chan struct{} // gate name → releases /events' next event
	out   bytes.Buffer             // everything a client received, for the canary scan
}

// nativeIdle is the fixture egressd's -idle-timeout.
const nativeIdle = 2 * time.Second

func newNativeFixture(t *testing.T) *nativeFixture {
	t.Helper()
	is := is.New(t)
	root := newRoot(t)
	ca := egresstest.NewCA(t)
	f := &nativeFixture{auth: map[string]string{}, ended: map[string]time.Time{}, gates: map[string]chan struct{}{}}
	srv := ca.TLSServer(t, http.HandlerFunc(f.serve), "api.test")
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	f.url = "https://api.test:" + port
	sd := startSecretd(t, root)
	f.eg = startEgressd(t, root, "-ca-file", ca.WriteFile(t, root), "-resolve", "api.test:"+port+":127.0.0.1",
		"-idle-timeout", nativeIdle.String())
	_, err := sd.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "api", Value: []byte(canary),
		Destinations: []string{f.url}, Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, "")
	is.NoErr(err)
	st, err := sd.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "api", Invocation: "inv-n"})
	is.NoErr(err)
	_, err = f.eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-n", ProxyToken: token, Handles: [][]byte{st.Handle}})
	is.NoErr(err)
	return f
}

// serve is api.test. Paths are matched by their first segment, so each
// test uses a path of its own:
//
//	/events/..?gate=G&n=N  N server-sent events, each after the test released gate G (the first at once), then [DONE]
//	/echo/..               the Authorization it got, in the body
//	/trailer/..            "body", then the trailer X-Sum: ok
//	/cut/..                "hello", then the connection breaks
//	/silent/..             its header, then nothing until the request ends
//	/echo-late/..          1000 bytes, then the key with every character \u-escaped
//	/echo-head/..          a header holding the key \u-escaped
//	/big/..?size=N         N bytes of pattern
//	/think/..              nothing at all until the request ends
func (f *nativeFixture) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.auth[r.URL.Path] = r.Header.Get("Authorization")
	f.mu.Unlock()
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if key != canary {
		http.Error(w, "bad key", http.StatusUnauthorized)
		return
	}
	fl := w.(http.Flusher)
	wait := func() {
		<-r.Context().Done()
		f.mu.Lock()
		f.ended[r.URL.Path] = time.Now()
		f.mu.Unlock()
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch first {
	case "events":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		gate := f.gate(r.URL.Query().Get("gate"))
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range n {
			if i > 0 {
				select {
				case <-gate:
				case <-r.Context().Done():
					return
				case <-time.After(10 * time.Second): // a test that never releases it fails on its own
				}
			}
			fmt.Fprintf(w, "data: {\"i\":%d}\n\n", i)
			fl.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	case "echo":
		io.WriteString(w, "echo "+r.Header.Get("Authorization"))
	case "trailer":
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		w.Header().Set("X-Sum", "ok")
	case "cut":
		io.WriteString(w, "hello")
		fl.Flush()
		panic(http.ErrAbortHandler) // the connection (or HTTP/2 stream) breaks
	case "silent":
		w.WriteHeader(http.StatusOK)
		fl.Flush()
		wait()
	case "echo-late":
		io.WriteString(w, strings.Repeat("a", 1000))
		fl.Flush()
		io.WriteString(w, `{"echo":"`+uEscape(key)+`"}`)
	case "echo-head":
		w.Header().Set("X-Echo", uEscape(key))
		io.WriteString(w, "fine")
	case "big":
		size, _ := strconv.Atoi(r.URL.Query().Get("size"))
		writePattern(w, size)
	case "think":
		wait()
	}
}

// gate returns the gate named name, made on first use.
func (f *nativeFixture) gate(name string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.gates[name]
	if !ok {
		g = make(chan struct{})
		f.gates[name] = g
	}
	return g
}

// seen returns the Authorization that reached the upstream at path.
func (f *nativeFixture) seen(path string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.auth[path]
}

// endedWithin waits up to d for the upstream to see path's request end.
func (f *nativeFixture) endedWithin(path string, since time.Time, d time.Duration) (time.Duration, bool) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		f.mu.Lock()
		at, ok := f.ended[path]
		f.mu.Unlock()
		if ok {
			return at.Sub(since), true
		}
	}
	return 0, false
}

// keep adds what a client received to the canary scan.
func (f *nativeFixture) keep(parts ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range parts {
		fmt.Fprintf(&f.out, "%v\n", p)
	}
}

// req is a GET of path as inv-n, with no key of its own: egressd injects it.
func (f *nativeFixture) req(path string) *egressdapi.RequestRequest {
	return &egressdapi.RequestRequest{Invocation: "inv-n", Method: "GET", URL: f.url + path}
}

// open opens path's streamed answer.
func (f *nativeFixture) open(t *testing.T, path string) *egressdapi.ResponseStream {
	t.Helper()
	rs, err := f.eg.api.RequestStream(ctx, f.req(path))
	if err != nil {
		t.Fatalf("egress.request_stream %s: %v", path, err)
	}
	t.Cleanup(func() { rs.Close() })
	f.keep(rs.Status, rs.Headers)
	return rs
}

// frames opens path's streamed answer on a raw rpc stream and returns
// every frame until the stream ends (an error frame, eof, or the close
// after it).
func (f *nativeFixture) frames(t *testing.T, path string) []*wire.StreamFrame {
	t.Helper()
	var acc egressdapi.RequestStreamResponse
	st, err := f.eg.rpc.OpenStream(ctx, egressdapi.OpEgressRequestStream, f.req(path), &acc)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer st.Close()
	st.Conn().SetReadDeadline(time.Now().Add(20 * time.Second))
	f.keep(acc.Status, acc.Headers)
	var out []*wire.StreamFrame
	for {
		fr, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: after %d frames: %v", path, len(out), err)
		}
		f.keep(string(fr.B), fr.H, fr.Code, fr.Msg)
		out = append(out, fr)
	}
}

// TestNativeStream: egress.request_stream against a real egressd and
// secretd and a TLS upstream; every output is scanned for the canary at
// the end.
func TestNativeStream(t *testing.T) {
	t.Parallel()
	f := newNativeFixture(t)
	t.Run("group", func(t *testing.T) {
		t.Run("events arrive frame by frame", f.testEvents)
		t.Run("credential injected, echo scrubbed", f.testInjected)
		t.Run("trailers", f.testTrailers)
		t.Run("frames are bounded", f.testBounded)
		t.Run("cut off ends with an error frame", f.testCutOff)
		t.Run("refusals match egress.request", f.testRefusals)
		t.Run("client gone ends the upstream request", f.testClientGone)
		t.Run("deadline before the header ends the upstream request", f.testDeadline)
	})
	// Every output: what clients received, egressd's log, the audit log.
	probe := redact.NewScrubber()
	probe.Register([]byte(canary))
	f.mu.Lock()
	received := f.out.String()
	f.mu.Unlock()
	for what, s := range map[string]string{"frames": received, "egressd log": f.eg.stderr.String(), "audit": f.eg.auditLog(t)} {
		if probe.Contains([]byte(s)) {
			t.Errorf("the canary is in the %s", what)
		}
		checkNoCanary(t, s)
	}
	is.New(t).True(strings.Contains(f.eg.auditLog(t), `"via":"egress.request_stream"`))
}

// testEvents: each event reaches the client before the upstream sends
// the next one (the upstream waits for the test to release it).
func (f *nativeFixture) testEvents(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const n = 3
	gate := f.gate("events")
	rs := f.open(t, "/events/1?gate=events&n="+strconv.Itoa(n))
	is.Equal(rs.Status, 200)
	is.Equal(headerValue(rs.Headers, "Content-Type"), "text/event-stream")
	var got []byte
	buf := make([]byte, 4096)
	for i := range n {
		want := fmt.Sprintf("data: {\"i\":%d}\n\n", i)
		for !bytes.Contains(got, []byte(want)) { // the last one may come with [DONE]
			m, err := rs.Read(buf)
			is.NoErr(err) // an event arrives before the next one is sent
			got = append(got, buf[:m]...)
		}
		if i < n-1 {
			gate <- struct{}{} // now the upstream sends the next one
		}
	}
	rest, err := io.ReadAll(rs)
	is.NoErr(err)
	all := string(got) + string(rest)
	is.True(strings.HasSuffix(all, "data: {\"i\":2}\n\ndata: [DONE]\n\n"))
	f.keep(all)
}

// testInjected: the staged credential reaches the upstream, injected by
// egressd, and its echo comes back scrubbed, as egress.request answers.
func (f *nativeFixture) testInjected(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	rs := f.open(t, "/echo/1")
	body, err := io.ReadAll(rs)
	is.NoErr(err)
	f.keep(string(body))
	is.Equal(rs.Status, 200)
	is.Equal(f.seen("/echo/1"), "Bearer "+canary)
	is.Equal(string(body), "echo Bearer "+redact.Redacted)
	is.Equal(rs.Trailers(), nil) // none sent

	buffered, err := f.eg.api.Request(ctx, f.req("/echo/2"))
	is.NoErr(err)
	is.Equal(string(buffered.Body), string(body))
	is.Equal(headerValue(rs.Headers, "Content-Type"), headerValue(buffered.Headers, "Content-Type"))
	is.Equal(headerValue(rs.Headers, "Content-Length"), "") // the length changes when a value is scrubbed out
}

// headerValue returns the first value of name in hs ("" when absent).
func headerValue(hs []egressdapi.Header, name string) string {
	for _, h := range hs {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// testTrailers: the trailers frame arrives after the body and before eof.
func (f *nativeFixture) testTrailers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	rs := f.open(t, "/trailer/1")
	is.Equal(rs.Trailers(), nil) // not before the body ends
	body, err := io.ReadAll(rs)
	is.NoErr(err)
	is.Equal(string(body), "body")
	is.Equal(rs.Trailers(), []egressdapi.Header{{Name: "X-Sum", Value: "ok"}})

	frames := f.frames(t, "/trailer/2")
	var types []string
	for _, fr := range frames {
		types = append(types, fr.T)
	}
	is.Equal(types, []string{wire.StreamData, wire.StreamTrailers, wire.StreamEOF})
	is.Equal(frames[1].H, []wire.HeaderField{{Name: "X-Sum", Value: "ok"}})
}

// testBounded: a body larger than a frame arrives byte-exact in data
// frames of at most StreamDataMax bytes.
func (f *nativeFixture) testBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const size = 300_000
	var body []byte
	for _, fr := range f.frames(t, "/big/1?size="+strconv.Itoa(size)) {
		switch fr.T {
		case wire.StreamData:
			is.True(len(fr.B) > 0 && len(fr.B) <= egressdapi.StreamDataMax)
			body = append(body, fr.B...)
		default:
			is.Equal(fr.T, wire.StreamEOF)
		}
	}
	is.Equal(len(body), size)
	is.Equal(sha256.Sum256(body), patternSum(size)) // byte-exact
}

// testCutOff: an answer the pipeline cuts off after it was accepted ends
// with one error frame carrying the pipeline's code, never eof; the typed
// client returns that code from Read.
func (f *nativeFixture) testCutOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path string
		codes      []string // the codes allowed (the echo's depends on the scrubber)
	}{
		{"upstream breaks", "/cut", []string{egressdapi.CodeUpstreamError}},
		{"idle timeout", "/silent", []string{egressdapi.CodeTimeout}},
		{"escaped echo", "/echo-late", []string{egressdapi.CodeResponseAborted, egressdapi.CodeUpstreamError}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			frames := f.frames(t, tc.path+"/raw")
			is.True(len(frames) > 0)
			last := frames[len(frames)-1]
			is.Equal(last.T, wire.StreamError)
			is.True(contains(tc.codes, last.Code))
			is.True(last.Msg != "")
			for _, fr := range frames[:len(frames)-1] {
				is.Equal(fr.T, wire.StreamData) // no eof, no trailers
			}

			rs := f.open(t, tc.path+"/typed")
			body, err := io.ReadAll(rs)
			f.keep(string(body), err)
			is.True(contains(tc.codes, wire.CodeOf(err)))
			var we *wire.Error
			is.True(errors.As(err, &we))
			is.Equal(we.Retry, wire.RetryAfterObserve)
			_, err = rs.Read(make([]byte, 1))
			is.True(contains(tc.codes, wire.CodeOf(err))) // it stays failed
			is.Equal(rs.Trailers(), nil)
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// testRefusals: a request refused before its answer is accepted gets the
// same code from egress.request_stream as from egress.request, on the
// caller's side (an unknown invocation, a policy denial, a raw value) and
// on the upstream's (a header holding an echo that cannot be removed).
func (f *nativeFixture) testRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  egressdapi.RequestRequest
		code string
	}{
		{"unknown invocation", egressdapi.RequestRequest{Invocation: "inv-none", Method: "GET", URL: f.url + "/echo/r1"}, egressdapi.CodeBundleUnknown},
		{"policy denied", egressdapi.RequestRequest{Invocation: "inv-n", Method: "GET", URL: "https://elsewhere.example.com/"}, egressdapi.CodePolicyDenied},
		{"raw value from the caller", egressdapi.RequestRequest{Invocation: "inv-n", Method: "GET", URL: f.url + "/echo/r2",
			Headers: []egressdapi.Header{{Name: "X-Copy", Value: canary}}}, egressdapi.CodeManualCredential},
		{"method forbidden", egressdapi.RequestRequest{Invocation: "inv-n", Method: "TRACE", URL: f.url + "/echo/r3"}, egressdapi.CodeMethodForbidden},
		{"echo in a header", egressdapi.RequestRequest{Invocation: "inv-n", Method: "GET", URL: f.url + "/echo-head/r4"}, egressdapi.CodeUpstreamError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			_, berr := f.eg.api.Request(ctx, &tc.req)
			rs, serr := f.eg.api.RequestStream(ctx, &tc.req)
			if rs != nil {
				rs.Close()
			}
			f.keep(berr, serr)
			is.Equal(wire.CodeOf(berr), tc.code)
			is.Equal(wire.CodeOf(serr), tc.code)
			is.True(rs == nil)
			is.Equal(wire.AsError(serr).Msg, wire.AsError(berr).Msg)
		})
	}
	t.Run("unknown field", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		bad := map[string]any{"invocation": "inv-n", "method": "GET", "url": f.url + "/echo/r5", "zz": "x"}
		_, err := f.eg.rpc.OpenStream(ctx, egressdapi.OpEgressRequestStream, bad, nil)
		is.Equal(wire.CodeOf(err), wire.CodeRequestUnknownField)
	})
}

// testClientGone: a client that leaves while the answer streams — with
// detach (Close), by closing its connection, or by sending a frame the op
// does not take — ends the upstream request within 1 s, audited as
// egress.client_closed.
func (f *nativeFixture) testClientGone(t *testing.T) {
	t.Parallel()
	open := func(t *testing.T, path string) *rpc.Stream {
		st, err := f.eg.rpc.OpenStream(ctx, egressdapi.OpEgressRequestStream, f.req(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	for _, tc := range []struct {
		name  string
		leave func(t *testing.T, path string)
	}{
		{"detach", func(t *testing.T, path string) {
			rs := f.open(t, path)
			rs.Close()
		}},
		{"connection closed", func(t *testing.T, path string) {
			open(t, path).Close()
		}},
		{"a data frame", func(t *testing.T, path string) {
			st := open(t, path)
			is.New(t).NoErr(st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("more")}))
			st.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
			fr, err := st.Recv()
			is.New(t).NoErr(err)
			is.New(t).Equal(fr.Code, wire.CodeRequestInvalid)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := "/silent/" + strings.ReplaceAll(tc.name, " ", "-")
			gone := time.Now()
			tc.leave(t, path) // the answer was accepted: the upstream has its request
			took, ok := f.endedWithin(path, gone, 5*time.Second)
			is.True(ok)
			if took > time.Second {
				t.Errorf("the upstream request ended %v after the client left (bound 1 s)", took)
			}
			is.True(waitAudit(t, f.eg, `"code":"egress.client_closed"`))
		})
	}
}

// testDeadline: the rpc deadline bounds the wait for the header; when it
// passes, the caller has stopped waiting and the upstream request ends.
func (f *nativeFixture) testDeadline(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const path = "/think/1"
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	rs, err := f.eg.api.RequestStream(dctx, f.req(path))
	is.True(rs == nil)
	is.Equal(wire.CodeOf(err), wire.CodeRequestDeadline)
	deadline, _ := dctx.Deadline()
	took, ok := f.endedWithin(path, deadline, 5*time.Second)
	is.True(ok)
	if took > time.Second {
		t.Errorf("the upstream request ended %v after the deadline (bound 1 s)", took)
	}
}

// TestNativeStreamShutdown: a stream open when egressd stops ends with
// one server.shutting_down error frame, and its upstream request ends.
func TestNativeStreamShutdown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newNativeFixture(t)
	const path = "/silent/shutdown"
	st, err := f.eg.rpc.OpenStream(ctx, egressdapi.OpEgressRequestStream, f.req(path), nil)
	is.NoErr(err)
	defer st.Close()
	st.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
	stopped := make(chan error, 1)
	begin := time.Now()
	go func() { stopped <- f.eg.stop() }()
	fr, err := st.Recv()
	is.NoErr(err)
	is.Equal(fr.T, wire.StreamError)
	is.Equal(fr.Code, wire.CodeServerShuttingDown)
	took, ok := f.endedWithin(path, begin, 5*time.Second)
	is.True(ok)
	if took > time.Second {
		t.Errorf("the upstream request ended %v after egressd began to stop (bound 1 s)", took)
	}
	is.NoErr(<-stopped)
}
