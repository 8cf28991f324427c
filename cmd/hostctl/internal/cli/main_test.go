package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/buildtest"
	"hostkit.dev/lib/proctest"
	"hostkit.dev/lib/rpc"
)

// binDir holds the daemons and hostctl, built once for every test
// process (buildtest).
var binDir string

// TestMain builds every binary once, and makes this process a child
// subreaper: PID 1 on the test machines does not reap orphans.
func TestMain(m *testing.M) {
	if err := proctest.Subreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("/tmp", "hkbin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	_ = os.Chmod(dir, 0o755) // tests run some binaries as another uid
	// Linked from the build cache, which is private to this user, into
	// the one directory the demo and the helper's allowlist expect.
	if err := buildtest.Install(context.Background(), dir,
		"../../../secretd", "../../../egressd", "../../../supervisord",
		"../../../containerization-helper", "../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if left := proctest.Leftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d processes left behind by the tests (ended now):\n", len(left))
		for _, p := range left {
			fmt.Fprintf(os.Stderr, "  %d %s\n", p.PID, p.Args)
		}
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemonProc is a daemon started as a real process for a test.
type daemonProc struct {
	cmd    *exec.Cmd
	stderr *syncBuf
	socket string
	done   chan error
}

// shortRoot makes a short root directory under /tmp (sun_path is small).
func shortRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "hk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startDaemon runs binary with -root root and waits until it answers health.
func startDaemon(t *testing.T, binary, name, root string, args ...string) *daemonProc {
	t.Helper()
	p := &daemonProc{stderr: &syncBuf{mu: make(chan struct{}, 1)}, socket: filepath.Join(root, "run", name, "api.sock"), done: make(chan error, 1)}
	if binary == "containerization-helper" {
		// The helper also authenticates its peer's executable: this test
		// binary polls its health, next to the hostctl built beside it.
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		args = append([]string{"-allow-exe", self, "-allow-exe", filepath.Join(binDir, "hostctl")}, args...)
	}
	if binary == "egressd" && !slices.Contains(args, "-proxy-address") {
		// A free port: the default 127.0.0.1:4750 may be an installed
		// egressd's, or another test's.
		args = append([]string{"-proxy-address", "127.0.0.1:0"}, args...)
	}
	p.cmd = exec.Command(filepath.Join(binDir, binary), append([]string{"-root", root}, args...)...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.kill() })
	c := rpc.NewClient(p.socket, time.Second)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := healthapi.Get(context.Background(), c)
		if err == nil {
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("%s exited before it was ready: %v\n%s", binary, err, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %v\n%s", binary, err, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends sig and returns the exit error (nil for exit 0).
func (p *daemonProc) stop(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("daemon did not stop on %v", sig)
		return nil
	}
}

func (p *daemonProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(5 * time.Second):
		}
	}
}

// runCLI runs hostctl in-process and returns exit code, stdout and stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, bytes.NewReader(nil), &out, &errb)
	return code, out.String(), errb.String()
}

func exitStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
