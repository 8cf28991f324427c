//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/egresstest"
)

// uploadSeen is what the upstream saw of one request body.
type uploadSeen struct {
	n        int64
	sum      [32]byte
	complete bool // the body ended cleanly
	leaked   bool // the canary or the placeholder was in it
}

// uploadSink is an upstream that reads every request body to its end
// (or its breaking), hashing it and looking for the canary and the
// placeholder across reads, and answers "n=<bytes>". /early-hints first
// sends a 103 with a Link field; /slow waits before reading the body.
type uploadSink struct {
	mu   sync.Mutex
	seen map[string]uploadSeen
	ph   string
}

func (s *uploadSink) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/early-hints" {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
	}
	h := sha256.New()
	var (
		n      int64
		tail   []byte
		leaked bool
		buf    = make([]byte, 64<<10)
	)
	var err error
	for {
		var k int
		k, err = r.Body.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			n += int64(k)
			win := append(tail, buf[:k]...)
			s.mu.Lock()
			ph := s.ph
			s.mu.Unlock()
			leaked = leaked || bytes.Contains(win, []byte(canary)) || (ph != "" && bytes.Contains(win, []byte(ph)))
			tail = append(tail[:0], win[max(0, len(win)-64):]...)
		}
		if err != nil {
			break
		}
	}
	seen := uploadSeen{n: n, complete: err == io.EOF, leaked: leaked}
	h.Sum(seen.sum[:0])
	s.mu.Lock()
	s.seen[r.URL.Path] = seen
	s.mu.Unlock()
	fmt.Fprintf(w, "n=%d", n)
}

// wait returns what the upstream saw of path's body, once it has seen it.
func (s *uploadSink) wait(t *testing.T, path string) uploadSeen {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		seen, ok := s.seen[path]
		s.mu.Unlock()
		if ok {
			return seen
		}
	}
	t.Fatalf("the upstream never finished %s", path)
	return uploadSeen{}
}

func newUploadFixture(t *testing.T, start func(*testing.T, string, ...string) *egressd, args ...string) (*llmFixture, *uploadSink) {
	t.Helper()
	sink := &uploadSink{seen: map[string]uploadSeen{}}
	ca := egresstest.NewCA(t)
	f := &llmFixture{ended: map[string]time.Time{}, auth: map[string]string{}}
	srv := ca.TLSServer(t, http.HandlerFunc(sink.serve), "llm.test")
	srv.EnableHTTP2 = true
	f.setup(t, ca, start, "llm.test", strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port), args...)
	sink.mu.Lock()
	sink.ph = f.ph
	sink.mu.Unlock()
	return f, sink
}

// patternReader is n bytes of writePattern's body, made as it is read.
func patternReader(n int) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		writePattern(pw, n)
		pw.Close()
	}()
	return pr
}

// post sends body to path through egressd with the placeholder as the
// key; length -1 sends it chunked.
func (f *llmFixture) post(t *testing.T, c *http.Client, path string, body io.Reader, length int64) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", f.url+path, body)
	req.ContentLength = length
	req.Header.Set("Authorization", "Bearer "+f.ph)
	return c.Do(req)
}

// vmHWM is a process's peak resident set (VmHWM, bytes).
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestUploadStreamsLargeBody: bodies far past -max-request-body and
// -buffer-budget (1 and 2 MiB here) reach the upstream byte for byte,
// announced and chunked, from a Go client on HTTP/1.1 (uploadSize: 256
// MiB) and on HTTP/2 inside the tunnel and from curl -T (an eighth of
// it), while egressd (a child process) stays small: it never holds a
// body.
func TestUploadStreamsLargeBody(t *testing.T) {
	t.Parallel()
	f, sink := newUploadFixture(t, startEgressdProc, "-max-request-body", "1048576", "-buffer-budget", "2097152")
	for _, tc := range []struct {
		name   string
		client *http.Client
		size   int
		length int64
	}{
		{"http1 announced", f.client(t), uploadSize, uploadSize},
		{"h2 chunked", f.h2client(t), uploadSize / 8, -1},
	} {
		size := tc.size
		path := "/" + strings.ReplaceAll(tc.name, " ", "-")
		is := is.New(t)
		start := time.Now()
		resp, err := f.post(t, tc.client, path, patternReader(size), tc.length)
		is.NoErr(err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		is.Equal(resp.StatusCode, http.StatusOK)
		is.Equal(string(b), "n="+strconv.Itoa(size))
		seen := sink.wait(t, path)
		is.True(seen.complete)
		is.Equal(seen.sum, patternSum(size)) // byte for byte
		t.Logf("%s: %d MiB in %v (%.1f MB/s)", tc.name, size>>20, time.Since(start).Round(time.Millisecond), float64(size)/time.Since(start).Seconds()/1e6)
	}
	// curl -T: a file uploaded with PUT (and Expect: 100-continue).
	needClient(t, "/usr/bin/curl")
	size := uploadSize / 8
	file := filepath.Join(t.TempDir(), "up.bin")
	out, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	writePattern(out, size)
	out.Close()
	cmd := exec.Command("curl", "-sS", "-f", "-T", file, "-H", "Authorization: Bearer "+f.ph, f.url+"/curl")
	cmd.Env = f.env()
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v: %s", err, got)
	}
	is := is.New(t)
	is.Equal(string(got), "n="+strconv.Itoa(size))
	seen := sink.wait(t, "/curl")
	is.Equal(seen.sum, patternSum(size))
	hwm := vmHWM(t, f.eg.pid)
	t.Logf("egressd peak RSS %d MiB after uploads of %d, %d and %d MiB", hwm>>20, uploadSize>>20, size>>20, size>>20)
	is.True(hwm < 160<<20) // far less than one body
	checkNoCanary(t, f.eg.stderr.String()+f.eg.auditLog(t))
}

// TestUploadFindingAborts: a held value or a placeholder after 1 MiB of
// a streamed body fails the upstream request before the body is
// complete (chunked: no last chunk; announced: the connection closed
// short; h2: the stream reset); the upstream never sees the finding, the
// client gets the buffered scan's code, and the audit record says why.
// The clean control reaches the upstream whole.
func TestUploadFindingAborts(t *testing.T) {
	t.Parallel()
	f, sink := newUploadFixture(t, startEgressd)
	const mib = 1 << 20
	for _, tc := range []struct {
		name   string
		insert func(f *llmFixture) string
		code   string
	}{
		{"value", func(*llmFixture) string { return canary }, "egress.secret_in_request"},
		{"value percent-encoded", func(*llmFixture) string { return pctAll(canary) }, "egress.secret_in_request"},
		{"placeholder", func(f *llmFixture) string { return f.ph }, "egress.placeholder_misuse"},
		{"placeholder upper case", func(f *llmFixture) string { return strings.ToUpper(f.ph) }, "egress.placeholder_misuse"},
		{"clean", func(*llmFixture) string { return "nothing held" }, ""},
	} {
		for _, mode := range []struct {
			name   string
			client *http.Client
			chunk  bool
		}{{"http1-chunked", f.client(t), true}, {"http1-announced", f.client(t), false}, {"h2", f.h2client(t), true}} {
			t.Run(tc.name+"/"+mode.name, func(t *testing.T) {
				is := is.New(t)
				path := "/" + strings.ReplaceAll(tc.name+"-"+mode.name, " ", "-")
				var body bytes.Buffer
				body.WriteString(textFiller(mib))
				body.WriteString(tc.insert(f))
				body.WriteString(textFiller(64 << 10))
				length := int64(body.Len())
				if mode.chunk {
					length = -1
				}
				resp, err := f.post(t, mode.client, path, bytes.NewReader(body.Bytes()), length)
				if tc.code == "" {
					is.NoErr(err)
					resp.Body.Close()
					is.Equal(resp.StatusCode, http.StatusOK)
					is.True(sink.wait(t, path).complete)
					return
				}
				if err == nil { // the refusal, unless the client saw its connection closed first
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					is.Equal(resp.StatusCode, http.StatusForbidden)
					is.Equal(resp.Header.Get("X-Hostkit-Error"), tc.code)
					checkNoCanary(t, string(b))
				}
				seen := sink.wait(t, path)
				is.True(!seen.complete) // never a request that looks complete
				is.True(!seen.leaked)
				t.Logf("the upstream saw %d bytes of %d", seen.n, body.Len())
				is.True(seen.n <= mib) // nothing from the finding (at 1 MiB) on
				is.True(waitAudit(t, f.eg, `"code":"`+tc.code+`"`))
			})
		}
	}
	checkNoCanary(t, f.eg.stderr.String()+f.eg.auditLog(t))
}

// textFiller is n bytes of JSON lines, as an LLM request or a log
// upload carries.
func textFiller(n int) string {
	line := `{"role":"user","content":"some text, 42 of it"}` + "\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

func pctAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// TestUploadInterimAnswers: for a streamed body, the upstream's 1xx
// answers reach the client: its 100 (Continue) to the client's Expect,
// and a 103 (Early Hints) with its fields, before that 100.
func TestUploadInterimAnswers(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f, sink := newUploadFixture(t, startEgressd)
	c := f.client(t)
	c.Transport.(*http.Transport).ExpectContinueTimeout = time.Minute // the client waits for a 100
	var (
		mu    sync.Mutex
		codes []int
		link  string
	)
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		mu.Lock()
		defer mu.Unlock()
		codes = append(codes, code)
		if code == http.StatusEarlyHints {
			link = h.Get("Link")
		}
		return nil
	}}
	for _, path := range []string{"/continue", "/early-hints"} {
		req, _ := http.NewRequest("POST", f.url+path, strings.NewReader(textFiller(256<<10)))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+f.ph)
		req.Header.Set("Expect", "100-continue")
		req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
		resp, err := c.Do(req)
		is.NoErr(err)
		resp.Body.Close()
		is.Equal(resp.StatusCode, http.StatusOK)
		seen := sink.wait(t, path)
		is.True(seen.complete)
	}
	mu.Lock()
	defer mu.Unlock()
	is.Equal(codes, []int{100, 103, 100})
	is.Equal(link, "</style.css>; rel=preload")
}
