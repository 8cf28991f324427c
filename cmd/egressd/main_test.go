package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/buildtest"
	"hostkit.dev/lib/rpc"
)

// secretdBin is the real secretd and egressdBin this egressd, built by
// TestMain once for all test processes (buildtest) and without the race
// detector (egressdBin is for tests that measure its memory or move many
// bytes through it).
var secretdBin, egressdBin string

func TestMain(m *testing.M) { os.Exit(mainTest(m)) }

func mainTest(m *testing.M) int {
	ctx := context.Background()
	var err error
	if secretdBin, err = buildtest.Binary(ctx, "../secretd"); err != nil {
		fmt.Fprintln(os.Stderr, "building secretd:", err)
		return 1
	}
	if egressdBin, err = buildtest.Binary(ctx, "."); err != nil {
		fmt.Fprintln(os.Stderr, "building egressd:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			return 1
		}
	}
	return code
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// newRoot returns a short -root directory (socket paths stay under the
// sun_path limit).
func newRoot(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "hke")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// secretd is a running secretd child process.
type secretd struct {
	cmd    *exec.Cmd
	stderr *lockedBuf
	api    *secretdapi.Client
	rpc    *rpc.Client
}

func startSecretd(t *testing.T, root string) *secretd {
	t.Helper()
	s := &secretd{stderr: &lockedBuf{}}
	s.cmd = exec.Command(secretdBin, "-root", root)
	s.cmd.Stderr = s.stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.rpc = rpc.NewClient(filepath.Join(root, "run", "secretd", "api.sock"), 5*time.Second)
	s.api = secretdapi.NewClient(s.rpc)
	t.Cleanup(func() {
		s.rpc.Close()
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	waitHealthy(t, s.rpc)
	return s
}

// egressd is egressd's run function serving in this process.
type egressd struct {
	api    *egressdapi.Client
	rpc    *rpc.Client
	stderr *lockedBuf
	root   string
	pid    int // of a separate process (startEgressdProc); 0 in process
	// stop stops egressd and returns run's error; it runs once (the
	// test's cleanup calls it too).
	stop func() error
}

func startEgressd(t *testing.T, root string, args ...string) *egressd {
	t.Helper()
	e := &egressd{stderr: &lockedBuf{}, root: root}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-root", root, "-audit-fsync", "never", "-proxy-address", "127.0.0.1:0", "-reregister-grace", "0"}, args...), &bytes.Buffer{}, e.stderr)
	}()
	e.rpc = rpc.NewClient(filepath.Join(root, "run", "egressd", "api.sock"), 10*time.Second)
	e.api = egressdapi.NewClient(e.rpc)
	e.stop = sync.OnceValue(func() error {
		e.rpc.Close()
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("egressd run: %v", err)
		}
	})
	waitHealthy(t, e.rpc)
	return e
}

// startEgressdProc runs egressdBin as a child process.
func startEgressdProc(t *testing.T, root string, args ...string) *egressd {
	t.Helper()
	e := &egressd{stderr: &lockedBuf{}, root: root}
	cmd := exec.Command(egressdBin, append([]string{"-root", root, "-audit-fsync", "never", "-proxy-address", "127.0.0.1:0", "-reregister-grace", "0"}, args...)...)
	cmd.Stderr = e.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.pid = cmd.Process.Pid
	e.rpc = rpc.NewClient(filepath.Join(root, "run", "egressd", "api.sock"), 10*time.Second)
	e.api = egressdapi.NewClient(e.rpc)
	t.Cleanup(func() {
		e.rpc.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("egressd: %v\n%s", err, e.stderr.String())
		}
	})
	waitHealthy(t, e.rpc)
	return e
}

func waitHealthy(t *testing.T, c *rpc.Client) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := healthapi.Get(ctx, c)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon at %s not healthy: %v", c.Path(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *egressd) auditLog(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, "log", "egressd", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
