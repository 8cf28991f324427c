//go:build linux

package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// matrixKey is the real value of the client matrix's credentials: a
// canary that may reach matrix.test only, inside Authorization.
const matrixKey = "CANARY-client-matrix-c41e7a"

// gitBackend is git's smart-HTTP CGI program (package git).
const gitBackend = "/usr/lib/git-core/git-http-backend"

// Credential classes a matrix fake sees in a request.
const (
	authReal        = "real"        // the real value: egressd substituted
	authPlaceholder = "placeholder" // a placeholder reached a server
	authNone        = "none"        // no Authorization
	authOther       = "other"       // anything else
)

// seen is one request (or raw TCP line) a matrix fake received.
type seen struct {
	tag  string // "row/mode", from the path's "/r/<row>/<mode>" prefix
	path string // the rest of the path
	auth string // authReal, authPlaceholder, authNone or authOther
}

// fake records what reaches one matrix server.
type fake struct {
	mu   sync.Mutex
	seen []seen
}

func (f *fake) add(s seen) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, s)
}

// of is what reached f for tag, in order.
func (f *fake) of(tag string) []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seen
	for _, s := range f.seen {
		if s.tag == tag {
			out = append(out, s)
		}
	}
	return out
}

// tagOf splits "/r/<row>/<mode>/rest" into "row/mode" and "/rest"
// ("", p for any other path).
func tagOf(p string) (tag, rest string) {
	parts := strings.SplitN(p, "/", 5) // "", "r", row, mode, rest
	if len(parts) < 4 || parts[0] != "" || parts[1] != "r" {
		return "", p
	}
	rest = "/"
	if len(parts) == 5 {
		rest += parts[4]
	}
	return parts[2] + "/" + parts[3], rest
}

// authClass classifies r's Authorization: the real value (as a bearer
// token or a Basic password), a placeholder, none, or something else.
func authClass(r *http.Request) string {
	a := r.Header.Get("Authorization")
	_, pass, basic := r.BasicAuth()
	switch {
	case a == "":
		return authNone
	case a == "Bearer "+matrixKey || basic && pass == matrixKey:
		return authReal
	case strings.Contains(a, "hkp_") || basic && strings.Contains(pass, "hkp_"):
		return authPlaceholder
	}
	return authOther
}

// matrixFakes are the client matrix's servers: matrix.test (the
// credentials' destination: a git server, a Python package index, an
// event stream, the OpenAI and Anthropic streaming APIs, and a plain
// answer for everything else; only with the real value), other.test (an
// allowed origin that is no credential's destination) and two raw TCP
// echo servers (raw.test, the port a tcp:// rule allows and one it does
// not).
type matrixFakes struct {
	mx, other, raw, rawOther fake
	mxURL, otherURL          string // https://name:port
	rawURL, rawOtherURL      string // tcp://raw.test:port
	resolve                  []string
	repos                    string // one bare repository per tag, made on its first request
	seed                     string // the repository each tag's copy starts from
	wheel                    []byte
	mu                       sync.Mutex
	made                     map[string]bool
}

// wheelName is the one distribution the index serves.
const wheelName = "hkmatrix-1.0-py3-none-any.whl"

func newMatrixFakes(t *testing.T, s *egressStack) *matrixFakes {
	t.Helper()
	m := &matrixFakes{repos: t.TempDir(), made: map[string]bool{}, wheel: makeWheel(t)}
	m.seed = filepath.Join(t.TempDir(), "repo.git")
	seedRepo(t, m.seed)
	port := func(l net.Listener) string { return fmt.Sprint(l.Addr().(*net.TCPAddr).Port) }
	mx := s.ca.server(t, "matrix.test", http.HandlerFunc(m.serveMatrix))
	other := s.ca.server(t, "other.test", http.HandlerFunc(m.serveOther))
	raw, rawOther := echoServer(t, &m.raw), echoServer(t, &m.rawOther)
	m.mxURL, m.otherURL = "https://matrix.test:"+port(mx.Listener), "https://other.test:"+port(other.Listener)
	m.rawURL, m.rawOtherURL = "tcp://raw.test:"+port(raw), "tcp://raw.test:"+port(rawOther)
	m.resolve = []string{"matrix.test:" + port(mx.Listener) + ":127.0.0.1", "other.test:" + port(other.Listener) + ":127.0.0.1",
		"raw.test:" + port(raw) + ":127.0.0.1", "raw.test:" + port(rawOther) + ":127.0.0.1"}
	return m
}

// serveMatrix is matrix.test: 401 with a Basic challenge (as a git host
// or a package index answers) unless the request carries the real value.
func (m *matrixFakes) serveMatrix(w http.ResponseWriter, r *http.Request) {
	tag, rest := tagOf(r.URL.Path)
	a := authClass(r)
	m.mx.add(seen{tag: tag, path: rest, auth: a})
	if a != authReal {
		w.Header().Set("WWW-Authenticate", `Basic realm="matrix"`)
		http.Error(w, "credential required", http.StatusUnauthorized)
		return
	}
	fl := w.(http.Flusher)
	switch {
	case strings.HasPrefix(rest, "/git/"):
		dir, err := m.repoFor(tag)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h := &cgi.Handler{Path: gitBackend, Root: "/r/" + tag + "/git", Dir: dir,
			Env: []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=agent", "GIT_CONFIG_NOSYSTEM=1",
				"HOME=" + dir, "PATH=/usr/bin:/bin"}}
		h.ServeHTTP(w, r)
	case rest == "/simple/hkmatrix/":
		sum := sha256.Sum256(m.wheel)
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/r/%s/files/%s#sha256=%s\">%s</a></body></html>\n",
			tag, wheelName, hex.EncodeToString(sum[:]), wheelName)
	case rest == "/files/"+wheelName:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(m.wheel)
	case rest == "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{"one", "two", "three"} {
			fmt.Fprintf(w, "data: %s\n\n", ev)
			fl.Flush()
		}
	case rest == "/v1/chat/completions":
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{"hel", "lo"} {
			fmt.Fprintf(w, `data: {"id":"chatcmpl-hk","object":"chat.completion.chunk","created":%d,"model":"gpt-test",`+
				`"choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", time.Now().Unix(), d)
			fl.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	case rest == "/v1/messages":
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(name, fields string) {
			fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q%s}\n\n", name, name, fields)
			fl.Flush()
		}
		event("message_start", `,"message":{"id":"msg_hk","type":"message","role":"assistant","content":[],"model":"claude-test",`+
			`"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`)
		event("content_block_start", `,"index":0,"content_block":{"type":"text","text":""}`)
		for _, d := range []string{"hel", "lo"} {
			event("content_block_delta", fmt.Sprintf(`,"index":0,"delta":{"type":"text_delta","text":%q}`, d))
		}
		event("content_block_stop", `,"index":0`)
		event("message_delta", `,"delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}`)
		event("message_stop", "")
	default:
		io.WriteString(w, "matrix-ok\n")
	}
}

// serveOther is other.test: a client that sends no credential gets a
// Basic challenge (so git and pip send the placeholder next, which
// egressd must refuse); one that does is answered, for the test to see.
func (m *matrixFakes) serveOther(w http.ResponseWriter, r *http.Request) {
	tag, rest := tagOf(r.URL.Path)
	a := authClass(r)
	m.other.add(seen{tag: tag, path: rest, auth: a})
	if a == authNone {
		w.Header().Set("WWW-Authenticate", `Basic realm="other"`)
		http.Error(w, "credential required", http.StatusUnauthorized)
		return
	}
	io.WriteString(w, "other-reached\n")
}

// repoFor is tag's own bare repository (a copy of the seed), so that
// pushes from rows running in parallel never race.
func (m *matrixFakes) repoFor(tag string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir := filepath.Join(m.repos, strings.ReplaceAll(tag, "/", "-"))
	if !m.made[tag] {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if out, err := exec.Command("cp", "-a", m.seed, filepath.Join(dir, "repo.git")).CombinedOutput(); err != nil {
			return "", fmt.Errorf("cp: %v: %s", err, out)
		}
		m.made[tag] = true
	}
	return dir, nil
}

// headSubject is the subject of main's last commit in tag's repository.
func (m *matrixFakes) headSubject(tag string) string {
	dir := filepath.Join(m.repos, strings.ReplaceAll(tag, "/", "-"), "repo.git")
	out, _ := exec.Command("/usr/bin/git", "--git-dir", dir, "log", "-1", "--format=%s", "main").Output()
	return strings.TrimSpace(string(out))
}

// echoServer listens on 127.0.0.1 and echoes each connection's first
// line, recording it (its tag is the path the line names).
func echoServer(t *testing.T, f *fake) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(60 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err != nil {
					return
				}
				tag, _ := tagOf(strings.TrimSpace(strings.TrimPrefix(line, "ping ")))
				f.add(seen{tag: tag, auth: authNone})
				io.WriteString(c, line)
			}()
		}
	}()
	return l
}

// seedRepo makes dir, a bare repository with one commit on main.
func seedRepo(t *testing.T, dir string) {
	t.Helper()
	work := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "--bare", dir},
		{"-C", work, "init", "-q", "-b", "main"},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@test", "commit", "-q", "--allow-empty", "-m", "seed"},
		{"-C", work, "push", "-q", dir, "main"},
		{"-C", dir, "symbolic-ref", "HEAD", "refs/heads/main"},
	} {
		cmd := exec.Command("/usr/bin/git", args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work, "GIT_CONFIG_NOSYSTEM=1"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// makeWheel builds hkmatrix 1.0, a pure-Python wheel (PEP 427) with one
// empty module and a RECORD that lists every file's hash.
func makeWheel(t *testing.T) []byte {
	t.Helper()
	files := [][2]string{
		{"hkmatrix/__init__.py", ""},
		{"hkmatrix-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: hkmatrix\nVersion: 1.0\n"},
		{"hkmatrix-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: hostkit-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
		w, err := z.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, f[1])
	}
	record.WriteString("hkmatrix-1.0.dist-info/RECORD,,\n")
	w, err := z.Create("hkmatrix-1.0.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, record.String())
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
