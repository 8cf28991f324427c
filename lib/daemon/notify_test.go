package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestNotifierRealSocket runs a Service in a child process under a fake
// service manager: a real unixgram NOTIFY_SOCKET with a 200 ms watchdog.
// It expects READY=1 once, WATCHDOG=1 about every 100 ms while the child
// serves, then STOPPING=1 after SIGTERM, and a clean exit.
func TestNotifierRealSocket(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := tmpRoot(t)
	nsPath := filepath.Join(dir, "n.sock")
	ns, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nsPath, Net: "unixgram"})
	is.NoErr(err)
	defer ns.Close()

	root := filepath.Join(dir, "r")
	cmd := child("serve", childRootEnv+"="+root, "NOTIFY_SOCKET="+nsPath, "WATCHDOG_USEC=200000")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	is.NoErr(cmd.Start())
	exited := false
	defer func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	var msgs []string
	var readyAt, termAt time.Time
	buf := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if readyAt.IsZero() {
			ns.SetReadDeadline(deadline)
		} else if termAt.IsZero() {
			ns.SetReadDeadline(readyAt.Add(600 * time.Millisecond))
		} else {
			ns.SetReadDeadline(termAt.Add(10 * time.Second))
		}
		n, err := ns.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !readyAt.IsZero() && termAt.IsZero() {
			// 600 ms of serving are over: ask the child to stop.
			is.NoErr(cmd.Process.Signal(syscall.SIGTERM))
			termAt = time.Now()
			continue
		}
		if err != nil {
			t.Fatalf("reading NOTIFY_SOCKET after %q: %v\nchild stderr:\n%s", msgs, err, stderr.String())
		}
		msg := string(buf[:n])
		msgs = append(msgs, msg)
		if msg == "READY=1" && readyAt.IsZero() {
			readyAt = time.Now()
		}
		if msg == "STOPPING=1" {
			break
		}
	}
	is.NoErr(waitExit(t, cmd, 10*time.Second)) // clean exit
	exited = true

	is.True(len(msgs) >= 2)
	is.Equal(msgs[0], "READY=1")              // READY=1 first ...
	is.Equal(msgs[len(msgs)-1], "STOPPING=1") // ... STOPPING=1 last
	watchdogs := 0
	for _, m := range msgs[1 : len(msgs)-1] {
		is.Equal(m, "WATCHDOG=1") // READY=1 exactly once; nothing else in between
		watchdogs++
	}
	t.Logf("%d WATCHDOG=1 in %s of serving", watchdogs, termAt.Sub(readyAt))
	is.True(watchdogs >= 2)  // at about half the 200 ms interval: ~6 in 600 ms
	is.True(watchdogs <= 12) // not at a faster rate than half the interval
	is.True(strings.Contains(stderr.String(), `"msg":"daemon.ready"`))
	is.True(!strings.Contains(stderr.String(), "daemon.notify_failed"))
}

// TestNotifierWithoutSocket: no NOTIFY_SOCKET (TestMain removed it) makes
// every call a silent no-op, and Watchdog returns at once.
func TestNotifierWithoutSocket(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var buf bytes.Buffer
	n := NewNotifier(NewLogger(&buf, slog.LevelDebug, nil, "secretd"))
	n.Ready()
	n.Stopping()
	done := make(chan struct{})
	go func() { n.Watchdog(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watchdog blocked without a watchdog configured")
	}
	is.Equal(buf.String(), "") // nothing logged
}

// TestNotifierSendFailure points NOTIFY_SOCKET at nothing: the failure is
// logged, not fatal. It changes the environment, so it does not run in
// parallel.
func TestNotifierSendFailure(t *testing.T) {
	is := is.New(t)
	t.Setenv("NOTIFY_SOCKET", filepath.Join(tmpRoot(t), "absent.sock"))
	var buf bytes.Buffer
	n := NewNotifier(NewLogger(&buf, slog.LevelDebug, nil, "secretd"))
	n.Ready()
	lines := logLines(t, &buf)
	is.Equal(len(lines), 1)
	is.Equal(lines[0]["msg"], "daemon.notify_failed")
	is.Equal(lines[0]["state"], "READY=1")
}

// TestNotifierWatchdogStops: Watchdog sends until its context ends, then
// returns. It changes the environment, so it does not run in parallel.
func TestNotifierWatchdogStops(t *testing.T) {
	is := is.New(t)
	nsPath := filepath.Join(tmpRoot(t), "n.sock")
	ns, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: nsPath, Net: "unixgram"})
	is.NoErr(err)
	defer ns.Close()
	t.Setenv("NOTIFY_SOCKET", nsPath)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { NewNotifier(discardLogger()).Watchdog(ctx); close(done) }()
	buf := make([]byte, 64)
	for range 2 {
		ns.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := ns.Read(buf)
		is.NoErr(err)
		is.Equal(string(buf[:n]), "WATCHDOG=1")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watchdog did not return after its context ended")
	}
}

// TestNotifierWatchdogOtherPID: a WATCHDOG_PID naming another process
// means the watchdog is not ours (sd_watchdog_enabled(3)). It changes the
// environment, so it does not run in parallel.
func TestNotifierWatchdogOtherPID(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
	done := make(chan struct{})
	go func() { NewNotifier(discardLogger()).Watchdog(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watchdog ran for another process's WATCHDOG_PID")
	}
}
