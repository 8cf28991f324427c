package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// TestIdleExit: with -idle-timeout 300ms the helper stays while a
// connection is open, and exits (status 0) once it has had none for that
// long.
func TestIdleExit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := startHelper(t, "", newRoot(t), "-allow-exe", selfExe(t), "-idle-timeout", "300ms")
	c := rpc.NewClient(h.sock, 10*time.Second)
	hl, err := helperapi.NewClient(c).Health(ctxT(t, 10*time.Second))
	is.NoErr(err)
	is.Equal(hl.IdleTimeoutMS, int64(300))
	is.True(!h.wait(time.Second)) // the connection is still open: no exit
	c.Close()
	is.True(h.wait(5 * time.Second))
	is.NoErr(h.err) // exit status 0: an idle exit is not a failure
	is.True(hasLine(h.stderr.String(), "helper.idle_exit"))
}

// TestSocketActivation: the test plays the service manager. It holds the
// listening socket (as hostkit-containerization-helper.socket does) and,
// whenever the previous run has ended, hands it to systemd-socket-activate,
// which waits for a connection and then execs the helper with
// LISTEN_FDS=1. The first connection starts the helper, which serves
// health and exits when idle; a second connection starts it again (a new
// epoch).
func TestSocketActivation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const activate = "/usr/bin/systemd-socket-activate"
	if _, err := os.Stat(activate); err != nil {
		t.Fatalf("%s is missing (%v): scripts/setup installs it (package systemd)", activate, err)
	}
	root := newRoot(t)
	path := filepath.Join(root, "a.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	is.NoErr(err)
	defer l.Close()
	lf, err := l.File() // a dup for the children
	is.NoErr(err)
	defer lf.Close()

	var mu sync.Mutex
	var runs []error
	var stderr syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		for ctx.Err() == nil {
			// LISTEN_PID must be the pid that execs: sh's $$ survives exec.
			cmd := exec.Command("/bin/sh", "-c", `LISTEN_FDS=1 LISTEN_PID=$$ exec "$@"`, "sh",
				activate, "-E", "GORACE=atexit_sleep_ms=0",
				helperBin, "-root", root, "-allow-exe", selfExe(t), "-idle-timeout", "300ms")
			cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
			cmd.ExtraFiles = []*os.File{lf}
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Errorf("start activator: %v", err)
				return
			}
			stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
			err := cmd.Wait()
			stop()
			if ctx.Err() != nil {
				return
			}
			mu.Lock()
			runs = append(runs, err)
			mu.Unlock()
		}
	}()
	defer func() { cancel(); <-loopDone }()
	ended := func(n int) bool {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			k := len(runs)
			mu.Unlock()
			if k >= n {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	health := func() string {
		c := rpc.NewClient(path, 20*time.Second)
		defer c.Close()
		hl, err := helperapi.NewClient(c).Health(ctxT(t, 20*time.Second))
		if err != nil {
			t.Fatalf("health: %v\n%s", err, stderr.String())
		}
		is.Equal(hl.Status, "ok")
		return hl.Epoch
	}
	e1 := health()
	is.True(ended(1)) // idle exit
	e2 := health()    // the next connection starts it again
	is.True(e2 != e1)
	is.True(ended(2))
	mu.Lock()
	for _, err := range runs {
		is.NoErr(err) // every run ended with status 0
	}
	mu.Unlock()
	is.True(strings.Count(stderr.String(), `"msg":"daemon.socket_activated"`) == 2)
	is.True(strings.Count(stderr.String(), `"msg":"helper.idle_exit"`) == 2)
	fi, err := os.Lstat(path)
	is.NoErr(err)
	is.Equal(fi.Mode().Type(), os.ModeSocket) // the passed socket is left in place
}

// TestOwnBinaryReplaced: when the helper's own binary is replaced on disk
// (as a package upgrade does: a new file renamed over the old path), the
// next connection is refused with server.shutting_down, and the helper
// stops serving and exits with a non-zero status, logging why.
func TestOwnBinaryReplaced(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "containerization-helper")
	copyFile(t, helperBin, bin, nil)
	h := startHelper(t, bin, newRoot(t), "-allow-exe", selfExe(t))
	c := h.client(t)
	_, err := c.Health(ctxT(t, 10*time.Second))
	is.NoErr(err)
	copyFile(t, helperBin, bin, []byte("upgrade")) // rename over the running binary's path
	c2 := rpc.NewClient(h.sock, 10*time.Second)    // a new connection
	defer c2.Close()
	_, err = helperapi.NewClient(c2).Health(ctxT(t, 10*time.Second))
	is.Equal(wire.CodeOf(err), wire.CodeServerShuttingDown)
	is.True(h.wait(10 * time.Second))
	is.True(h.err != nil) // non-zero exit
	is.True(hasLine(h.stderr.String(), "helper.binary_changed"))
}

// copyFile writes src's bytes (plus extra) to dst through a temporary
// file renamed over it, mode 0755.
func copyFile(t *testing.T, src, dst string, extra []byte) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, append(b, extra...), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}
