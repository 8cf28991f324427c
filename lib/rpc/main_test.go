package rpc

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// childEnv selects a child-process role when the test binary is re-executed
// (hashicorp/go-plugin's TestHelperProcess pattern): "call" makes one call
// and prints its result as JSON; "serve" serves the test ops until killed.
const childEnv = "HK_RPC_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "call":
		os.Exit(childCall())
	case "serve":
		os.Exit(childServe())
	}
	dir, err := os.MkdirTemp("", "rpcbin")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err == nil {
		sharedBin, err = copySelf(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rpc tests: copying the test binary:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// sharedBin is a copy of the test binary in a 0755 directory, made by
// TestMain before any test runs: a copy written while parallel tests fork
// children can be held open for writing by a child between its fork and
// exec, and then executing it fails with ETXTBSY ("text file busy").
var sharedBin string

// childResult is what a "call" child prints.
type childResult struct {
	UID  int    `json:"uid"`
	N    int64  `json:"n"`
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

// childCall calls HK_OP on HK_SOCK with idempotency key HK_IDEM and body
// {n: HK_N}, and prints a childResult.
func childCall() int {
	var n int64
	fmt.Sscan(os.Getenv("HK_N"), &n)
	c := NewClient(os.Getenv("HK_SOCK"), 5*time.Second)
	defer c.Close()
	var out countBody
	var opts []CallOption
	if k := os.Getenv("HK_IDEM"); k != "" {
		opts = append(opts, WithIdem(k))
	}
	err := c.Call(context.Background(), os.Getenv("HK_OP"), &countBody{N: n}, &out, opts...)
	res := childResult{UID: os.Geteuid(), N: out.N}
	if err != nil {
		we := wire.AsError(err)
		res.Code, res.Msg = we.Code, we.Msg
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// childServe serves the test ops on HK_SOCK, prints "ready" and blocks.
func childServe() int {
	ctx := context.Background()
	l, err := sock.Listen(ctx, sock.Config{Path: os.Getenv("HK_SOCK"), Group: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var counter atomic.Int64
	srv, err := NewServer(Config{Daemon: "child", Roles: Roles{roleAdmin: {euid}}, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, testOps(&counter)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	srv.Serve(ctx, l)
	return 0
}

// testBinary returns the copy of the test binary that a child under
// another uid can execute (go test's build dir is 0700).
func testBinary(t *testing.T, _ string) string {
	t.Helper()
	return sharedBin
}

// copySelf copies the running test binary into dir as rpc.test (0755).
func copySelf(dir string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "rpc.test")
	return dst, os.WriteFile(dst, b, 0o755)
}

// runChildCall runs a "call" child as uid/gid and returns its result.
func runChildCall(t *testing.T, bin string, uid uint32, env ...string) childResult {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append([]string{childEnv + "=call", "PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child as uid %d: %v (%s)", uid, err, out)
	}
	var res childResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	return res
}

// startChildServer re-executes the test binary as a server on path and
// waits until it listens. The child is killed at cleanup.
func startChildServer(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=serve", "HK_SOCK="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("child server: %q %v", line, err)
	}
	return cmd
}
