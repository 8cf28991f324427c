package daemon

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"hostkit.dev/lib/rpc"
)

// Environment switches that turn the re-executed test binary into a child
// process (hashicorp/go-plugin's TestHelperProcess pattern).
const (
	childEnv     = "HK_DAEMON_CHILD" // serve | signals | sigpipe | harden
	childRootEnv = "HK_DAEMON_ROOT"  // serve: the -root of the child's layout
	childIgnore  = "HK_DAEMON_SIGPIPE_IGNORE"
	childReload  = "HK_DAEMON_RELOAD"  // serve: "" no Reload hook, "ok" or "fail" (childReloadErr)
	childDaemon  = "HK_DAEMON_SIGNALS" // signals: "1" uses DaemonSignalContext
)

// childReloadErr is what the serve child's failing Reload hook returns.
const childReloadErr = "reload canary refused"

// managerEnv lists the variables a service manager hands a daemon. The test
// process drops them, so in-process Service.Run calls never talk to a real
// manager, and children get only the ones a test sets.
var managerEnv = []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"}

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	for _, k := range managerEnv {
		os.Unsetenv(k)
	}
	// Children killed mid-test must still be reaped.
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// runChild is the body of a re-executed child; it returns the exit status.
func runChild(mode string) int {
	switch mode {
	case "serve":
		return childServe()
	case "signals":
		return childSignals()
	case "sigpipe":
		return childSigpipe()
	case "harden":
		return childHarden()
	case "main":
		childMain()
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 1
}

// childMain is a daemon's main whose run parses its flags and then fails
// at start-up; Main exits the process.
func childMain() {
	Main("testd", func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		f := newTestFlags()
		f.fs.SetOutput(stderr)
		if err := Parse(f.fs, &f.common, args, "testd", "HKTESTM", stdout); err != nil {
			return err
		}
		if _, err := f.common.Level(); err != nil {
			return err
		}
		return fmt.Errorf("listen %s: start-up failed", f.listen)
	})
}

// childServe runs a Service with the health op at <HK_DAEMON_ROOT>'s
// secretd socket (or a socket passed by activation) under
// DaemonSignalContext until SIGTERM, with the Reload hook HK_DAEMON_RELOAD
// names; it exits 0 when Run returned nil.
func childServe() int {
	ctx, stop := DaemonSignalContext(context.Background())
	defer stop()
	layout, err := RootLayout(os.Getenv(childRootEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "layout:", err)
		return 1
	}
	epoch, err := NewEpoch()
	if err != nil {
		fmt.Fprintln(os.Stderr, "epoch:", err)
		return 1
	}
	log := NewLogger(os.Stderr, slog.LevelInfo, nil, NameSecretd)
	svc := Service{
		Name:        NameSecretd,
		Socket:      layout.Socket(NameSecretd),
		SocketGroup: -1,
		Logger:      log,
		Roles:       rpc.Roles{"admin": {uint32(os.Geteuid())}},
		Ops:         []rpc.Op{Health(epoch, time.Now(), nil)},
	}
	switch os.Getenv(childReload) {
	case "ok":
		svc.Reload = func(context.Context) error { fmt.Println("reloaded"); return nil }
	case "fail":
		svc.Reload = func(context.Context) error { return errors.New(childReloadErr) }
	}
	if err := svc.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 1
	}
	fmt.Println("stopped")
	return 0
}

// childSignals waits for SignalContext's (with HK_DAEMON_SIGNALS=1,
// DaemonSignalContext's) context to end and reports it.
func childSignals() int {
	signals := SignalContext
	if os.Getenv(childDaemon) == "1" {
		signals = DaemonSignalContext
	}
	ctx, stop := signals(context.Background())
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("stopped", ctx.Err())
	return 0
}

// childSigpipe waits for a line on stdin, by which time the parent has
// closed the read end of our stdout, then writes to stdout and reports the
// write's result on stderr. With HK_DAEMON_SIGPIPE_IGNORE=1 it first calls
// SignalContext.
func childSigpipe() int {
	if os.Getenv(childIgnore) == "1" {
		_, stop := SignalContext(context.Background())
		defer stop()
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "stdin:", err)
		return 2
	}
	_, err := os.Stdout.Write([]byte("hello\n"))
	switch {
	case errors.Is(err, syscall.EPIPE):
		fmt.Fprintln(os.Stderr, "write: EPIPE")
	default:
		fmt.Fprintln(os.Stderr, "write:", err)
	}
	return 0
}

// child returns a command that re-executes the test binary in mode with the
// given extra environment.
func child(mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// GORACE: a -race child otherwise sleeps 1s at exit.
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// tmpRoot makes a short directory under /tmp (socket paths must stay under
// the sun_path limit), removed when the test ends.
func tmpRoot(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "hk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// readLine reads one line of a child's output.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading child output: %v (got %q)", err, line)
	}
	return strings.TrimSpace(line)
}

// waitExit waits for cmd at most d, killing it after that.
func waitExit(t *testing.T, cmd *exec.Cmd, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("child %d did not exit within %s", cmd.Process.Pid, d)
		return nil
	}
}

// discardLogger is a logger for tests that do not read logs.
func discardLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// syncBuffer is a bytes.Buffer safe to read while a child process or a
// logger writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// readyWriter closes ready at the first write that contains "daemon.ready"
// (Service.Run logs it once the socket listens, just before READY=1).
type readyWriter struct {
	once  sync.Once
	ready chan struct{}
}

func (w *readyWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"msg":"daemon.ready"`)) {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}
