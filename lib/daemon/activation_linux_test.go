package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

const socketActivate = "/usr/bin/systemd-socket-activate"

// TestServiceRunSocketActivated runs the "serve" child under
// systemd-socket-activate, which listens on a socket, execs the child on the
// first connection with LISTEN_FDS=1 and LISTEN_PID set, and passes the
// listener as fd 3. The child's Service must answer health on that socket,
// not create its own, stop cleanly on SIGTERM and leave the passed socket's
// path alone.
func TestServiceRunSocketActivated(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	if _, err := os.Stat(socketActivate); err != nil {
		t.Fatalf("%s is missing (%v): scripts/setup installs it (package systemd)", socketActivate, err)
	}
	dir := tmpRoot(t)
	root := filepath.Join(dir, "r")
	passed := filepath.Join(dir, "a.sock")
	cmd := exec.Command(socketActivate, "-l", passed,
		"-E", childEnv+"=serve",
		"-E", childRootEnv+"="+root,
		"-E", "GORACE=atexit_sleep_ms=0",
		os.Args[0], "-test.run=^$")
	cmd.Env = os.Environ()
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	is.NoErr(cmd.Start())
	exited := false
	defer func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	// systemd-socket-activate creates the socket, then waits for a
	// connection before it execs the child.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Lstat(passed); err == nil && fi.Mode().Type() == os.ModeSocket {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared; stderr:\n%s", passed, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c := rpc.NewClient(passed, 10*time.Second)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// The path exists once systemd-socket-activate has bound it, a moment
	// before it listens: retry while the connection is refused.
	h, err := healthapi.Get(ctx, c)
	for wire.CodeOf(err) == wire.CodeUnavailable && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		h, err = healthapi.Get(ctx, c)
	}
	if err != nil {
		t.Fatalf("health on the passed socket: %v; stderr:\n%s", err, stderr.String())
	}
	is.Equal(h.Status, "ok")
	is.True(epochRE.MatchString(h.Epoch))
	// A second call on a new connection reaches the same process.
	c2 := rpc.NewClient(passed, 10*time.Second)
	defer c2.Close()
	h2, err := healthapi.Get(ctx, c2)
	is.NoErr(err)
	is.Equal(h2.Epoch, h.Epoch)

	_, err = os.Lstat(filepath.Join(root, "run", NameSecretd, "api.sock"))
	is.True(errors.Is(err, os.ErrNotExist)) // the Service did not make its own socket

	is.NoErr(cmd.Process.Signal(syscall.SIGTERM)) // systemd-socket-activate exec'd the child: same pid
	err = waitExit(t, cmd, 15*time.Second)
	exited = true
	if err != nil {
		t.Fatalf("child exit: %v; stderr:\n%s", err, stderr.String())
	}
	is.Equal(strings.TrimSpace(stdout.String()), "stopped") // Run returned nil
	is.True(strings.Contains(stderr.String(), `"msg":"daemon.socket_activated"`))
	fi, err := os.Lstat(passed)
	is.NoErr(err)
	is.Equal(fi.Mode().Type(), os.ModeSocket) // a passed socket is not removed
}
