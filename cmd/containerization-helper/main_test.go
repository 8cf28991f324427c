package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/buildtest"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// helperBin is the helper built by TestMain, once for all test
// processes (buildtest).
var helperBin string

// Environment of the test binary re-executed as a client peer
// (clientMain).
const (
	envClient = "HK_HELPER_TEST_CLIENT" // the socket to call health on
	envWait   = "HK_HELPER_TEST_WAIT"   // "1": read a line from stdin first
	envRaw    = "HK_HELPER_TEST_RAW"    // "1": send one raw frame, print the answer's code and id
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(envClient); sock != "" {
		os.Exit(clientMain(sock))
	}
	bin, err := buildtest.Binary(context.Background(), ".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helperBin = bin
	// Container inits orphaned by a killed helper, and those of containers
	// the tests make with runc directly, are reparented here rather than to
	// PID 1 (which does not reap here); they are reaped once every test has
	// ended, when no exec.Cmd waits any more.
	unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	code := m.Run()
	reapAll()
	os.Exit(code)
}

// reapAll reaps every exited child; only after m.Run, when no test waits
// for its own children any more.
func reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// clientMain is the test binary as a peer: optionally wait for a line on
// stdin (so the test can change the binary on disk after the process
// started), call health, and print "ok" or the error code.
func clientMain(sock string) int {
	if os.Getenv(envWait) == "1" {
		bufio.NewReader(os.Stdin).ReadString('\n')
	}
	if os.Getenv(envRaw) == "1" {
		return rawClient(sock)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := rpc.NewClient(sock, 10*time.Second)
	defer c.Close()
	if layout := os.Getenv(envLayout); layout != "" {
		return layoutClient(ctx, helperapi.NewClient(c), layout, os.Getenv(envLayoutOp))
	}
	_, err := helperapi.NewClient(c).Health(ctx)
	if err != nil {
		fmt.Println(wire.CodeOf(err))
		return 0
	}
	fmt.Println("ok")
	return 0
}

// rawID is the request id rawClient sends.
var rawID = []byte("raw-request-id-1")

// rawClient sends one health request frame with rawID, by hand (the rpc
// client would check the answer's id itself), and prints the answer's
// code ("ok" on success) and id in hex.
func rawClient(sock string) int {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := &wire.Request{ID: rawID, Op: "health", Deadline: time.Now().Add(5 * time.Second).UnixMilli()}
	if err := wire.WriteFrame(c, wire.AppendRequest(nil, r), 0); err != nil {
		fmt.Println("write:", err)
		return 1
	}
	p, err := wire.ReadFrame(c, 0)
	if err != nil {
		fmt.Println("read:", err)
		return 1
	}
	resp, err := wire.DecodeResponse(p, wire.Limits{})
	if err != nil {
		fmt.Println("decode:", err)
		return 1
	}
	code := "ok"
	if resp.Err != nil {
		code = resp.Err.Code
	}
	fmt.Printf("%s %x\n", code, resp.ID)
	return 0
}

// syncBuffer is a bytes.Buffer safe for a child's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// helperProc is one running helper process.
type helperProc struct {
	root   string
	sock   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error // Wait's, once done is closed
}

// runtimeRoot is the runc --root of the helper under root.
func runtimeRoot(root string) string { return filepath.Join(root, "state", "helper", "runtime") }

// newRoot makes a short -root under /tmp, removed at the end of the test.
func newRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "hk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	return root
}

// selfExe is the test binary's path: the default client peer, so it is on
// every helper's allowlist unless a test says otherwise.
func selfExe(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startHelper runs bin (the built helper unless bin is "") with -root
// root and args, and waits until it serves. The process
// is stopped (SIGTERM, then SIGKILL) and reaped at the end of the test.
func startHelper(t *testing.T, bin, root string, args ...string) *helperProc {
	t.Helper()
	if bin == "" {
		bin = helperBin
	}
	h := &helperProc{root: root, sock: filepath.Join(root, "run", "helper", "api.sock"), stderr: &syncBuffer{}, done: make(chan struct{})}
	h.cmd = exec.Command(bin, append([]string{"-root", root, "-log-level", "debug"}, args...)...)
	h.cmd.Stderr = h.stderr
	h.cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.err = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() { h.stop(t) })
	// Ready once it logged daemon.ready: a socket file alone may be a
	// stale one of a killed predecessor.
	deadline := time.Now().Add(20 * time.Second)
	for !hasLine(h.stderr.String(), "daemon.ready") {
		select {
		case <-h.done:
			t.Fatalf("helper exited at start: %v\n%s", h.err, h.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper never became ready\n%s", h.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return h
}

// stop ends the helper (SIGTERM, then SIGKILL after 10 s) and reaps it.
func (h *helperProc) stop(t *testing.T) {
	select {
	case <-h.done:
		return
	default:
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Errorf("helper did not stop on SIGTERM; killing it")
		h.cmd.Process.Kill()
		<-h.done
	}
}

// kill9 kills the helper with SIGKILL and reaps it.
func (h *helperProc) kill9() {
	h.cmd.Process.Kill()
	<-h.done
}

// wait waits up to d for the helper to exit on its own; it reports
// whether it did.
func (h *helperProc) wait(d time.Duration) bool {
	select {
	case <-h.done:
		return true
	case <-time.After(d):
		return false
	}
}

// client returns a typed client on the helper's socket, closed at the end
// of the test.
func (h *helperProc) client(t *testing.T) *helperapi.Client {
	t.Helper()
	c := rpc.NewClient(h.sock, 60*time.Second)
	t.Cleanup(func() { c.Close() })
	return helperapi.NewClient(c)
}

// auditText returns the helper's audit log.
func (h *helperProc) auditText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.root, "log", "helper", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// hasLine reports whether the helper's stderr log has a JSON line with
// msg.
func hasLine(s, msg string) bool { return strings.Contains(s, `"msg":"`+msg+`"`) }

// rpcIdem sets an idempotency key on a raw rpc call.
func rpcIdem(key string) rpc.CallOption { return rpc.WithIdem(key) }
