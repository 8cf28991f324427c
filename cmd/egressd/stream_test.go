//go:build linux

package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
)

// llmFixture is secretd + egressd in front of llm.test, an HTTPS fake of
// a streaming API: the credential's destination, whose key reaches it
// only through an intercepted tunnel that substitutes the placeholder.
type llmFixture struct {
	eg   *egressd
	info *egressdapi.InfoResponse
	url  string // https://llm.test:<port>
	ph   string // inv-s's placeholder
	tok  string

	mu    sync.Mutex
	ended map[string]time.Time // path → when the upstream saw its client go away
	auth  map[string]string    // path → the Authorization that reached the upstream
}

// fixtureIdle is the fixture egressd's -idle-timeout: long, because a
// test's client or upstream starved of the CPU on a loaded machine must
// not turn what the test checks into an idle timeout. Tests about the idle
// timeout pass -idle-timeout streamIdle.
const fixtureIdle = time.Minute

// streamIdle is the -idle-timeout of the tests that check it.
const streamIdle = 2 * time.Second

func newLLMFixture(t *testing.T, args ...string) *llmFixture {
	t.Helper()
	return newLLMFixtureWith(t, startEgressd, args...)
}

// newLLMFixtureWith is newLLMFixture with egressd started by start
// (startEgressd in process, or startEgressdProc).
func newLLMFixtureWith(t *testing.T, start func(*testing.T, string, ...string) *egressd, args ...string) *llmFixture {
	t.Helper()
	ca := egresstest.NewCA(t)
	f := &llmFixture{ended: map[string]time.Time{}, auth: map[string]string{}}
	srv := ca.TLSServer(t, http.HandlerFunc(f.serve), "llm.test")
	f.setup(t, ca, start, "llm.test", strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port), args...)
	return f
}

// setup starts secretd and egressd (by start) with host:port mapped to
// 127.0.0.1 and ca trusted, puts the credential llm for https://host:port
// (header Authorization, "Bearer {}"), and registers inv-s with a lease
// of it.
func (f *llmFixture) setup(t *testing.T, ca *egresstest.CA, start func(*testing.T, string, ...string) *egressd, host, port string, args ...string) {
	t.Helper()
	is := is.New(t)
	root := newRoot(t)
	f.tok = strings.Repeat("s", 43)
	f.url = "https://" + host + ":" + port
	sd := startSecretd(t, root)
	f.eg = start(t, root, append([]string{"-ca-file", ca.WriteFile(t, root), "-resolve", host + ":" + port + ":127.0.0.1",
		"-idle-timeout", fixtureIdle.String()}, args...)...)
	var err error
	f.info, err = f.eg.api.Info(ctx)
	is.NoErr(err)
	_, err = sd.api.CredentialPut(ctx, &secretdapi.CredentialPutRequest{Name: "llm", Value: []byte(canary),
		Destinations: []string{f.url}, Targets: []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}}, "")
	is.NoErr(err)
	st, err := sd.api.LeaseStage(ctx, &secretdapi.LeaseStageRequest{Credential: "llm", Invocation: "inv-s"})
	is.NoErr(err)
	f.ph = st.Placeholder
	_, err = f.eg.api.BundleRegister(ctx, &egressdapi.BundleRegisterRequest{Invocation: "inv-s", ProxyToken: f.tok, Handles: [][]byte{st.Handle}})
	is.NoErr(err)
}

// serve is llm.test. Every path answers after checking the key:
// /sse?n=N&gap=D sends N server-sent events D apart, each carrying the
// time it was sent (Unix ns); /trickle?n=N&gap=D one byte every D;
// /silent its header, then nothing until the client goes away; /think
// nothing at all until then; /echo-late 1 MiB, then the key with every
// character \u-escaped; /trailer a body and a trailer (?echo=1: holding
// the key escaped); /big?size=N N bytes of a known pattern.
func (f *llmFixture) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.auth[r.URL.Path] = r.Header.Get("Authorization")
	f.mu.Unlock()
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if key != canary {
		http.Error(w, "bad key", http.StatusUnauthorized)
		return
	}
	q := r.URL.Query()
	n, _ := strconv.Atoi(q.Get("n"))
	gap, _ := time.ParseDuration(q.Get("gap"))
	fl := w.(http.Flusher)
	wait := func() {
		<-r.Context().Done()
		f.mu.Lock()
		f.ended[r.URL.Path] = time.Now()
		f.mu.Unlock()
	}
	switch r.URL.Path {
	case "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range n {
			fmt.Fprintf(w, "event: delta\ndata: {\"i\":%d,\"sent\":%d}\n\n", i, time.Now().UnixNano())
			fl.Flush()
			time.Sleep(gap)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	case "/trickle":
		for range n {
			io.WriteString(w, "x")
			fl.Flush()
			time.Sleep(gap)
		}
	case "/silent":
		w.WriteHeader(http.StatusOK)
		fl.Flush()
		wait()
	case "/think":
		wait()
	case "/echo-late":
		chunk := strings.Repeat("a", 64<<10)
		for range 16 {
			io.WriteString(w, chunk)
			fl.Flush()
		}
		time.Sleep(100 * time.Millisecond) // the first MiB is on its way
		io.WriteString(w, `{"echo":"`+uEscape(key)+`"}`)
	case "/trailer":
		w.Header().Set("Trailer", "X-Sum")
		io.WriteString(w, "body")
		v := "ok"
		if q.Get("echo") == "1" {
			v = uEscape(key)
		}
		w.Header().Set("X-Sum", v)
	case "/big":
		size, _ := strconv.Atoi(q.Get("size"))
		writePattern(w, size)
	}
}

// uEscape writes every character of s as a JSON \u escape: an echo the
// scrubber cannot replace in place.
func uEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		fmt.Fprintf(&b, `\u%04x`, c)
	}
	return b.String()
}

// patternBlock is the 64 KiB block /big's body repeats, each copy's
// first 8 bytes replaced by its index (big-endian), so a lost, repeated
// or reordered block changes the body's SHA-256.
func patternBlock() []byte {
	b := make([]byte, 64<<10)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// writePattern writes size bytes of /big's body to w.
func writePattern(w io.Writer, size int) {
	block := patternBlock()
	buf := make([]byte, len(block))
	for k := 0; k*len(block) < size; k++ {
		copy(buf, block)
		binary.BigEndian.PutUint64(buf, uint64(k))
		n := min(len(buf), size-k*len(buf))
		if _, err := w.Write(buf[:n]); err != nil {
			return
		}
	}
}

// patternSum is the SHA-256 of /big's body of size bytes.
func patternSum(size int) [32]byte {
	h := sha256.New()
	writePattern(h, size)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// client is a Go client through egressd as inv-s, trusting egressd's CA.
func (f *llmFixture) client(t *testing.T) *http.Client {
	t.Helper()
	roots := f.roots(t)
	u, _ := url.Parse("http://inv-s:" + f.tok + "@" + f.info.ProxyAddress)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: roots}}}
}

// get sends GET path with the placeholder as the key.
func (f *llmFixture) get(t *testing.T, c *http.Client, path string) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+f.ph)
	return c.Do(req)
}

// endedWithin waits up to d for the upstream to see path's client go away.
func (f *llmFixture) endedWithin(path string, since time.Time, d time.Duration) (time.Duration, bool) {
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

// env is the agent's environment (docs/design.md, "A credentialed agent
// run", step 5).
func (f *llmFixture) env() []string {
	p := "http://inv-s:" + f.tok + "@" + f.info.ProxyAddress
	return []string{"PATH=/usr/bin:/bin", "http_proxy=" + p, "https_proxy=" + p, "HTTPS_PROXY=" + p, "NO_PROXY=", "HOME=/tmp",
		"SSL_CERT_FILE=" + f.info.CABundlePath, "CURL_CA_BUNDLE=" + f.info.CABundlePath, "REQUESTS_CA_BUNDLE=" + f.info.CABundlePath}
}

// eventDelays reads server-sent event lines from r until "[DONE]" and
// returns, for each event, how long after its sending it was read.
func eventDelays(t *testing.T, r io.Reader) []time.Duration {
	t.Helper()
	var out []time.Duration
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "[DONE]") {
			return out
		}
		_, rest, ok := strings.Cut(line, `"sent":`)
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(strings.TrimRight(rest, "}"), 10, 64)
		if err != nil {
			t.Fatalf("event line %q", line)
		}
		out = append(out, time.Since(time.Unix(0, ns)))
	}
	t.Fatalf("the stream ended without [DONE] after %d events: %v", len(out), sc.Err())
	return nil
}

// eventBound is how late an event may be read after it was sent: far
// above the benchmark's figure (bench/proxy), so that a loaded machine
// does not fail it, and below the 1 s between events, so that a proxy
// that holds an event back until the next one (or the end) fails.
const eventBound = 900 * time.Millisecond

// TestStreamSSEArrivesAsSent: server-sent events through an intercepted
// tunnel with a substituted key reach each client as they are sent, not
// when the answer ends: Go's net/http, curl -N, and Python requests with
// stream=True.
func TestStreamSSEArrivesAsSent(t *testing.T) {
	t.Parallel()
	f := newLLMFixture(t)
	const path = "/sse?n=5&gap=1s"
	check := func(t *testing.T, delays []time.Duration) {
		t.Helper()
		is := is.New(t)
		is.Equal(len(delays), 5)
		for i, d := range delays {
			if d > eventBound {
				t.Errorf("event %d read %v after it was sent (bound %v)", i, d, eventBound)
			}
		}
	}
	t.Run("go", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		resp, err := f.get(t, f.client(t), path)
		is.NoErr(err)
		defer resp.Body.Close()
		is.Equal(resp.StatusCode, 200)
		is.Equal(resp.Header.Get("Content-Type"), "text/event-stream")
		check(t, eventDelays(t, resp.Body))
	})
	t.Run("curl", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command("/usr/bin/curl", "-sS", "-N", "--max-time", "20", "-H", "Authorization: Bearer "+f.ph, f.url+path)
		check(t, runLines(t, cmd, f.env()))
	})
	t.Run("python requests", func(t *testing.T) {
		t.Parallel()
		script := `import sys, requests
r = requests.get(sys.argv[1], headers={"Authorization": "Bearer " + sys.argv[2]}, stream=True, timeout=20)
r.raise_for_status()
for line in r.iter_lines(chunk_size=1):
    print(line.decode(), flush=True)
`
		cmd := exec.Command("/usr/bin/python3", "-c", script, f.url+path, f.ph)
		check(t, runLines(t, cmd, f.env()))
	})
}

// runLines runs cmd with env and returns the event delays of its output.
func runLines(t *testing.T, cmd *exec.Cmd, env []string) []time.Duration {
	t.Helper()
	if _, err := os.Stat(cmd.Path); err != nil {
		t.Fatalf("needs %s (scripts/setup installs it)", cmd.Path)
	}
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	delays := eventDelays(t, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v: %s", cmd.Path, err, stderr.String())
	}
	return delays
}

// TestStreamEchoAfterAMiB: an answer that echoes the key in a form that
// cannot be removed in place after 1 MiB reaches the client as that MiB
// and then an incomplete body, never the key; the after record says
// egress.response_aborted and ended_by echo. The same echo at the start
// of an answer is refused whole (502), as a buffered answer is.
func TestStreamEchoAfterAMiB(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t)
	resp, err := f.get(t, f.client(t), "/echo-late")
	is.NoErr(err)
	is.Equal(resp.StatusCode, 200)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.True(errors.Is(err, io.ErrUnexpectedEOF)) // an incomplete chunked body, never a clean end
	// Everything before the echo's first byte, and nothing of it.
	is.Equal(string(body), strings.Repeat("a", 1<<20)+`{"echo":"`)
	is.True(waitAudit(t, f.eg, `"code":"egress.response_aborted"`))
	is.True(strings.Contains(f.eg.auditLog(t), `"ended_by":"echo"`))

	resp, err = f.get(t, f.client(t), "/trailer?echo=1")
	is.NoErr(err)
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	is.True(err != nil) // a trailer with an echo aborts: the last chunk never comes
	checkNoCanary(t, f.eg.stderr.String()+f.eg.auditLog(t))
}

// checkNoCanary fails when s holds the canary in a form a scrubber knows.
func checkNoCanary(t *testing.T, s string) {
	t.Helper()
	if strings.Contains(s, canary) || strings.Contains(s, uEscape(canary)) {
		t.Error("the canary leaked")
	}
}

// waitAudit waits for the audit log to hold s (the after record is
// written when the exchange ends, which the client may see first).
func waitAudit(t *testing.T, eg *egressd, s string) bool {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if strings.Contains(eg.auditLog(t), s) {
			return true
		}
	}
	t.Logf("audit log without %s:\n%s", s, eg.auditLog(t))
	return false
}

// TestStreamTrailers: a trailer reaches the client after the body,
// scrubbed like a header.
func TestStreamTrailers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t)
	resp, err := f.get(t, f.client(t), "/trailer")
	is.NoErr(err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.NoErr(err)
	is.Equal(string(body), "body")
	is.Equal(resp.Trailer.Get("X-Sum"), "ok")
}

// TestStreamIdleTimeout (idle 2 s): a stream with a byte every 1.5 s
// stays up past the idle timeout, as does one at idle - 0.5 s; one that
// goes silent after its header is cut and audited (ended_by
// idle_timeout).
func TestStreamIdleTimeout(t *testing.T) {
	t.Parallel()
	f := newLLMFixture(t, "-idle-timeout", streamIdle.String())
	for _, tc := range []struct {
		name, path string
		want       string // the body; "" for a cut
	}{
		{"byte every 1.5 s", "/trickle?n=6&gap=1500ms", "xxxxxx"},
		{"silent", "/silent", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			start := time.Now()
			resp, err := f.get(t, f.client(t), tc.path)
			if tc.want == "" {
				// The head waits for the first byte of the body, which
				// never comes: the exchange ends before it, refused.
				is.NoErr(err)
				is.Equal(resp.StatusCode, http.StatusGatewayTimeout)
				is.Equal(resp.Header.Get("X-Hostkit-Error"), egressdapi.CodeTimeout)
				resp.Body.Close()
				is.True(time.Since(start) >= streamIdle)
				is.True(waitAudit(t, f.eg, `"ended_by":"idle_timeout"`))
				return
			}
			is.NoErr(err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			is.NoErr(err)
			is.Equal(string(body), tc.want)
			is.True(time.Since(start) > 3*streamIdle) // it outlived the idle timeout
		})
	}
}

// TestStreamClientGoneEndsUpstream: a client that goes away while the
// upstream thinks (no header yet) or streams (header sent, body pending)
// ends the upstream request within 1 s, audited as egress.client_closed.
func TestStreamClientGoneEndsUpstream(t *testing.T) {
	t.Parallel()
	f := newLLMFixture(t)
	for _, path := range []string{"/think", "/silent"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", f.url+path, nil)
			req.Header.Set("Authorization", "Bearer "+f.ph)
			done := make(chan error, 1)
			go func() {
				resp, err := f.client(t).Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			for f.seen(path) == "" { // the request reached the upstream
				time.Sleep(10 * time.Millisecond)
			}
			gone := time.Now()
			cancel() // closes the client's connection to egressd
			<-done
			took, ok := f.endedWithin(path, gone, 5*time.Second)
			is.True(ok)
			if took > time.Second {
				t.Errorf("the upstream saw the client go away after %v (bound 1 s)", took)
			}
			is.True(waitAudit(t, f.eg, `"code":"egress.client_closed"`))
		})
	}
}

// seen returns the Authorization that reached the upstream at path ("":
// nothing yet).
func (f *llmFixture) seen(path string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.auth[path]
}

// TestStreamLargeAnswer: an answer of 256 MiB (past the old 4 MiB cap;
// -max-response-body is none by default) arrives byte-exact through the
// intercepted tunnel of an egressd process whose resident memory grows
// by less than 32 MiB meanwhile; with -max-response-body the answer is
// cut off there.
func TestStreamLargeAnswer(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixtureWith(t, startEgressdProc)
	const size = 256 << 20
	before := rss(t, f.eg.pid, "VmRSS")
	resp, err := f.get(t, f.client(t), "/big?size="+strconv.Itoa(size))
	is.NoErr(err)
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	is.NoErr(err)
	is.Equal(n, int64(size))
	var sum [32]byte
	is.Equal([32]byte(h.Sum(sum[:0])), patternSum(size)) // byte-exact
	peak := rss(t, f.eg.pid, "VmHWM")
	t.Logf("egressd resident: %d KiB before, peak %d KiB", before>>10, peak>>10)
	if peak-before > 32<<20 {
		t.Errorf("egressd's resident memory grew by %d KiB moving %d MiB (bound 32 MiB)", (peak-before)>>10, size>>20)
	}

	capped := newLLMFixture(t, "-max-response-body", "1048576")
	resp, err = capped.get(t, capped.client(t), "/big?size="+strconv.Itoa(4<<20))
	is.NoErr(err)
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	is.True(err != nil) // cut off, never a clean end
	is.True(waitAudit(t, capped.eg, `"code":"egress.response_too_large"`))
}

// rss reads a size field (VmRSS, VmHWM) of /proc/pid/status, in bytes.
func rss(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestExpectContinueAnsweredByEgressd: a client that sends "Expect:
// 100-continue" gets 100 (Continue) from egressd before it sends its
// body, which egressd reads whole before the request goes upstream.
func TestExpectContinueAnsweredByEgressd(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t)
	// Plain HTTP through the proxy face to egressd's own origin is not
	// allowed, so use the tunnel: CONNECT, TLS, then the request.
	conn, br := f.tunnel(t)
	defer conn.Close()
	body := strings.Repeat("b", 1000)
	fmt.Fprintf(conn, "POST /trickle?n=1 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
		strings.TrimPrefix(f.url, "https://"), f.ph, len(body))
	line, err := br.ReadString('\n')
	is.NoErr(err)
	is.Equal(line, "HTTP/1.1 100 Continue\r\n")
	line, err = br.ReadString('\n')
	is.NoErr(err)
	is.Equal(line, "\r\n")
	io.WriteString(conn, body)
	resp, err := http.ReadResponse(br, nil)
	is.NoErr(err)
	got, err := io.ReadAll(resp.Body)
	is.NoErr(err)
	is.Equal(resp.StatusCode, 200)
	is.Equal(string(got), "x")
}

// tunnel opens an intercepted tunnel to llm.test as inv-s.
func (f *llmFixture) tunnel(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", f.info.ProxyAddress)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(f.url, "https://")
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", host, host, basic("inv-s", f.tok))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: "llm.test", RootCAs: f.roots(t), NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc, bufio.NewReader(tc)
}

// roots is egressd's public CA bundle as a pool.
func (f *llmFixture) roots(t *testing.T) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(f.info.CABundlePath)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool
}

// TestStreamStatsCountOpenStream: egress stats counts an open stream's
// answer bytes as they pass, before it ends.
func TestStreamStatsCountOpenStream(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t)
	resp, err := f.get(t, f.client(t), "/trickle?n=4&gap=500ms")
	is.NoErr(err)
	defer resp.Body.Close()
	buf := make([]byte, 2)
	_, err = io.ReadFull(resp.Body, buf)
	is.NoErr(err)
	st, err := f.eg.api.Stats(ctx, "inv-s")
	is.NoErr(err)
	is.Equal(len(st.Invocations), 1)
	got := st.Invocations[0].NetworkIngressBytes
	is.True(got >= 2 && got < 4) // counted while open
	rest, err := io.ReadAll(resp.Body)
	is.NoErr(err)
	is.Equal(string(buf)+string(rest), "xxxx")
}

// TestBufferBudget: request bodies held at once share -buffer-budget: a
// body that would pass it is refused with 503 server.busy while another
// holds the budget, and accepted once it is back.
func TestBufferBudget(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t, "-max-request-body", "65536", "-buffer-budget", "65536")
	host := strings.TrimPrefix(f.url, "https://")
	post := func(conn net.Conn, body string) {
		fmt.Fprintf(conn, "POST /trickle?n=1 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", host, f.ph, 65536, body)
	}
	holder, hbr := f.tunnel(t) // announces 64 KiB, sends 10 bytes: it holds the budget
	defer holder.Close()
	post(holder, strings.Repeat("h", 10))
	time.Sleep(200 * time.Millisecond) // egressd reads the head and takes the budget
	other, obr := f.tunnel(t)
	defer other.Close()
	post(other, strings.Repeat("o", 65536))
	resp, err := http.ReadResponse(obr, nil)
	is.NoErr(err)
	is.Equal(resp.StatusCode, http.StatusServiceUnavailable)
	is.Equal(resp.Header.Get("X-Hostkit-Error"), "server.busy")
	io.WriteString(holder, strings.Repeat("h", 65536-10))
	resp, err = http.ReadResponse(hbr, nil)
	is.NoErr(err)
	is.Equal(resp.StatusCode, 200)
	io.Copy(io.Discard, resp.Body)
	third, tbr := f.tunnel(t)
	defer third.Close()
	post(third, strings.Repeat("t", 65536))
	resp, err = http.ReadResponse(tbr, nil)
	is.NoErr(err)
	is.Equal(resp.StatusCode, 200) // the budget is back
}

// TestRequestTimeoutRenamed: the old -request-timeout still starts egressd
// (as -total-timeout), with a warning naming the new flag.
func TestRequestTimeoutRenamed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t, "-request-timeout", "30s")
	is.True(strings.Contains(f.eg.stderr.String(), "-request-timeout is now -total-timeout"))
	is.True(strings.Contains(f.eg.stderr.String(), `"level":"WARN"`))
	resp, err := f.get(t, f.client(t), "/trickle?n=1")
	is.NoErr(err)
	resp.Body.Close()
	is.Equal(resp.StatusCode, 200)
}

// TestTotalTimeout: -total-timeout cuts a stream that runs longer, even
// one that is never idle.
func TestTotalTimeout(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t, "-total-timeout", "1s")
	resp, err := f.get(t, f.client(t), "/trickle?n=20&gap=200ms")
	is.NoErr(err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	is.True(err != nil) // cut off, never a clean end
	is.True(len(body) < 20)
	is.True(waitAudit(t, f.eg, `"ended_by":"total_timeout"`))
}

// TestH2InsideTunnel: a Go client that offers h2 in ALPN inside the
// intercepted tunnel speaks HTTP/2 to egressd, and egressd HTTP/2 to the
// h2 upstream; the key is substituted, and concurrent streams on one
// connection each get their own decision: the placeholder at its staged
// header is substituted while the same placeholder in another header is
// refused (egress.placeholder_misuse), side by side.
func TestH2InsideTunnel(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newLLMFixture(t)
	u, _ := url.Parse("http://inv-s:" + f.tok + "@" + f.info.ProxyAddress)
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: f.roots(t)}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	type result struct {
		proto  string
		status int
		code   string
		body   string
	}
	do := func(header string) result {
		req, _ := http.NewRequest("GET", f.url+"/sse?n=2&gap=50ms", nil)
		req.Header.Set(header, "Bearer "+f.ph)
		resp, err := c.Do(req)
		if err != nil {
			return result{code: err.Error()}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{resp.Proto, resp.StatusCode, resp.Header.Get("X-Hostkit-Error"), string(b)}
	}
	is.Equal(do("Authorization").proto, "HTTP/2.0") // one connection, then its streams
	var wg sync.WaitGroup
	results := make([]result, 8)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := "Authorization"
			if i%2 == 1 {
				h = "X-Other"
			}
			results[i] = do(h)
		}()
	}
	wg.Wait()
	for i, r := range results {
		is.Equal(r.proto, "HTTP/2.0")
		if i%2 == 0 {
			is.Equal(r.status, 200)
			is.True(strings.Contains(r.body, "[DONE]"))
		} else {
			is.Equal(r.status, http.StatusForbidden)
			is.Equal(r.code, egressdapi.CodePlaceholderMisuse)
		}
	}
	is.Equal(f.seen("/sse"), "Bearer "+canary) // substituted upstream
	checkNoCanary(t, f.eg.stderr.String()+f.eg.auditLog(t))
	is.True(strings.Contains(f.eg.auditLog(t), `"proto":"h2"`))
}
