//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/buildtest"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// childEnv turns the re-executed test binary into an unprivileged client
// (see childOps).
const childEnv = "HK_SECRETD_CHILD"

// otherUID runs the child client: a uid that holds no role.
const otherUID = 65533

// Set by TestMain.
var (
	secretdBin string // the secretd binary, built once (buildtest)
	childDir   string // a directory any uid may traverse, for runChild's copy
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childOps())
	}
	os.Exit(mainTest(m))
}

func mainTest(m *testing.M) int {
	// Adopt any orphaned descendant so it is reaped, not left behind.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		return 1
	}
	bin, err := buildtest.Binary(context.Background(), ".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	secretdBin = bin
	dir, err := os.MkdirTemp("/tmp", "hkbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	childDir = dir
	code := m.Run()
	// Every child must have been waited for; reap and report stragglers.
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err != nil || pid == 0 {
			if pid == 0 {
				fmt.Fprintln(os.Stderr, "leaked child processes")
				return 1
			}
			break
		}
		fmt.Fprintf(os.Stderr, "reaped orphan %d\n", pid)
	}
	return code
}

// proc is a running secretd process.
type proc struct {
	root   string
	cmd    *exec.Cmd
	stderr *lockedBuf
	done   chan error
	api    *secretdapi.Client
	raw    *rpc.Client
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

func (l *lockedBuf) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// newRoot makes a short root under /tmp that other users may traverse.
func newRoot(t *testing.T) string {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "hk")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	t.Cleanup(func() { os.RemoveAll(root) })
	return root
}

// startDaemon runs secretd -root root args... with extra environment and
// waits until it answers health.
func startDaemon(t *testing.T, root string, env []string, args ...string) *proc {
	t.Helper()
	d := &proc{root: root, stderr: &lockedBuf{}, done: make(chan error, 1)}
	d.cmd = exec.Command(secretdBin, append([]string{"-root", root}, args...)...)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stderr = d.stderr
	d.cmd.Stdout = io.Discard
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() { d.stop(t) })
	d.raw = rpc.NewClient(d.socket(), 5*time.Second)
	d.api = secretdapi.NewClient(d.raw)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := healthapi.GetAll(context.Background(), d.raw); err == nil {
			return d
		}
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("secretd exited: %v\n%s", err, d.stderr.Bytes())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("secretd did not become ready:\n%s", d.stderr.Bytes())
		}
	}
}

func (d *proc) socket() string { return filepath.Join(d.root, "run", "secretd", "api.sock") }

// stop sends SIGTERM, waits (SIGKILL after 5 s) and is idempotent.
func (d *proc) stop(t *testing.T) {
	if d.cmd.ProcessState != nil {
		return
	}
	d.raw.Close()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if err != nil {
			t.Errorf("secretd exit: %v\n%s", err, d.stderr.Bytes())
		}
	case <-time.After(5 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		t.Error("secretd did not stop on SIGTERM")
	}
}

// auditBytes returns every audit file's content.
func (d *proc) auditBytes(t *testing.T) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(d.root, "log", "secretd", "audit.jsonl*"))
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

var (
	childCopy    sync.Once
	childCopyErr error
)

// childResult is what the child client prints: op → error code ("" = ok).
type childResult map[string]string

// runChild re-executes the test binary as uid/gid otherUID, calling every
// op on socket (consume and lookup with handle).
func runChild(t *testing.T, socket string, handle []byte) childResult {
	t.Helper()
	// The test binary may live in a private build directory: copy it, once,
	// where the other uid can execute it.
	exe := filepath.Join(childDir, "secretd.test")
	childCopy.Do(func() {
		self, err := os.Executable()
		if err == nil {
			var raw []byte
			if raw, err = os.ReadFile(self); err == nil {
				err = os.WriteFile(exe, raw, 0o755)
			}
		}
		childCopyErr = err
	})
	if childCopyErr != nil {
		t.Fatal(childCopyErr)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{childEnv + "=1", "HK_SOCK=" + socket, "HK_HANDLE=" + hex.EncodeToString(handle)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.Bytes())
	}
	var res childResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	return res
}

// childOps calls every op of secretd once and prints each code as JSON.
func childOps() int {
	c := rpc.NewClient(os.Getenv("HK_SOCK"), 5*time.Second)
	defer c.Close()
	handle, _ := hex.DecodeString(os.Getenv("HK_HANDLE"))
	bodies := map[string]any{
		"health":                      nil,
		secretdapi.OpCredentialPut:    &secretdapi.CredentialPutRequest{Name: "x", Value: []byte("child-value"), Destinations: []string{"https://a.example"}, Targets: []secretdapi.TargetSpec{{Target: "query:k"}}},
		secretdapi.OpCredentialDelete: &secretdapi.CredentialDeleteRequest{Name: "x"},
		secretdapi.OpCredentialList:   nil,
		secretdapi.OpLeaseStage:       &secretdapi.LeaseStageRequest{Credential: "x", Invocation: "i"},
		secretdapi.OpLeaseConsume:     &secretdapi.LeaseConsumeRequest{Handles: [][]byte{handle}, Invocation: "inv-1"},
		secretdapi.OpLeaseLookup:      &secretdapi.LeaseLookupRequest{Handle: handle},
		secretdapi.OpLeaseRevoke:      &secretdapi.LeaseRevokeRequest{Invocation: "inv-1"},
		secretdapi.OpLeaseList:        &secretdapi.LeaseListRequest{},
	}
	res := childResult{"uid": fmt.Sprint(os.Geteuid())}
	for op, body := range bodies {
		var out map[string]any
		err := c.Call(context.Background(), op, body, &out)
		res[op] = wire.CodeOf(err)
		if err == nil && strings.Contains(fmt.Sprint(out), "value") {
			res[op] = "leaked"
		}
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}
