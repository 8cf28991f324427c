package sock

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// sockPath returns <fresh /tmp root>/d/api.sock.
func sockPath(t *testing.T) string {
	return filepath.Join(tmpRoot(t), "d", SocketName)
}

// rawListen listens on path without sock's lock or checks, and without
// unlinking on close, as a foreign or crashed process would leave it.
func rawListen(t *testing.T, path string) *net.UnixListener {
	t.Helper()
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ul.SetUnlinkOnClose(false)
	return ul
}

func TestListenAlreadyRunning(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	cfg := Config{Path: sockPath(t), Group: -1}
	l, err := Listen(ctx, cfg)
	is.NoErr(err)
	_, err = Listen(ctx, cfg)
	is.Equal(wire.CodeOf(err), CodeAlreadyRunning)
	is.NoErr(l.Close())
	l2, err := Listen(ctx, cfg) // lock released by Close
	is.NoErr(err)
	is.NoErr(l2.Close())
}

func TestListenStaleAfterKill(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	path := sockPath(t)
	exe, err := os.Executable()
	is.NoErr(err)
	cmd := helper(exe, "listen", helperPathEnv+"="+path)
	out, err := cmd.StdoutPipe()
	is.NoErr(err)
	is.NoErr(cmd.Start())
	is.Equal(readLine(t, bufio.NewReader(out)), "ready")
	_, before := statOf(t, path)

	_, err = Listen(ctx, Config{Path: path, Group: -1})
	is.Equal(wire.CodeOf(err), CodeAlreadyRunning) // the child holds the lock

	is.NoErr(cmd.Process.Signal(syscall.SIGKILL))
	err = cmd.Wait()
	var exit *exec.ExitError
	is.True(errors.As(err, &exit))
	_, still := statOf(t, path) // kill -9 left the socket behind
	is.Equal(still.Ino, before.Ino)

	l, err := Listen(ctx, Config{Path: path, Group: -1})
	is.NoErr(err) // stale socket removed (bind would have failed otherwise)
	c, err := Dial(ctx, path)
	is.NoErr(err) // and we serve the new one
	sc, err := l.AcceptConn()
	is.NoErr(err)
	is.Equal(sc.Peer.PID, int32(os.Getpid()))
	is.NoErr(sc.Close())
	is.NoErr(c.Close())
	is.NoErr(l.Close())
}

func TestListenRefusesExisting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, path string) (check func(is *is.I))
		code  string
	}{
		{name: "regular file", code: CodePathExists, setup: func(t *testing.T, path string) func(*is.I) {
			if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
				t.Fatal(err)
			}
			return func(is *is.I) {
				b, err := os.ReadFile(path)
				is.NoErr(err)
				is.Equal(string(b), "keep me")
			}
		}},
		{name: "dangling symlink", code: CodePathExists, setup: func(t *testing.T, path string) func(*is.I) {
			if err := os.Symlink("/nonexistent/api.sock", path); err != nil {
				t.Fatal(err)
			}
			return func(is *is.I) {
				target, err := os.Readlink(path)
				is.NoErr(err)
				is.Equal(target, "/nonexistent/api.sock")
			}
		}},
		{name: "symlink to stale socket", code: CodePathExists, setup: func(t *testing.T, path string) func(*is.I) {
			other := filepath.Join(filepath.Dir(path), "o.sock")
			rawListen(t, other).Close()
			if err := os.Symlink(other, path); err != nil {
				t.Fatal(err)
			}
			return func(is *is.I) {
				target, err := os.Readlink(path)
				is.NoErr(err)
				is.Equal(target, other)
				fi, err := os.Lstat(other)
				is.NoErr(err)
				is.Equal(fi.Mode().Type(), os.ModeSocket)
			}
		}},
		{name: "live socket without lock", code: CodePathExists, setup: func(t *testing.T, path string) func(*is.I) {
			ul := rawListen(t, path)
			t.Cleanup(func() { ul.Close() })
			return func(is *is.I) {
				c, err := Dial(context.Background(), path)
				is.NoErr(err) // still served
				c.Close()
			}
		}},
		{name: "directory", code: CodePathExists, setup: func(t *testing.T, path string) func(*is.I) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			return func(is *is.I) {
				fi, err := os.Lstat(path)
				is.NoErr(err)
				is.True(fi.IsDir())
			}
		}},
		{name: "stale socket is replaced", setup: func(t *testing.T, path string) func(*is.I) {
			rawListen(t, path).Close()
			return func(*is.I) {}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := sockPath(t)
			is.NoErr(EnsureDir(filepath.Dir(path), 0, -1))
			check := tc.setup(t, path)
			for range 2 { // the lock is released after a refusal
				l, err := Listen(context.Background(), Config{Path: path, Group: -1})
				is.Equal(wire.CodeOf(err), tc.code)
				if err == nil {
					is.NoErr(l.Close())
				}
			}
			check(is)
		})
	}
}

// umask reads the process umask (set, then restored).
func umask() int {
	old := syscall.Umask(0o022)
	syscall.Umask(old)
	return old
}

// TestListenModes is not parallel: it sets the process umask.
func TestListenModes(t *testing.T) {
	tests := []struct {
		name     string
		umask    int
		cfg      Config
		dirMode  os.FileMode
		sockMode os.FileMode
		gid      int
	}{
		{name: "defaults", umask: 0o022, cfg: Config{Group: -1}, dirMode: 0o700, sockMode: 0o600, gid: os.Getegid()},
		{name: "defaults, permissive umask", umask: 0, cfg: Config{Group: -1}, dirMode: 0o700, sockMode: 0o600, gid: os.Getegid()},
		{name: "group modes, strict umask", umask: 0o077,
			cfg:     Config{DirMode: 0o750, SocketMode: 0o660, Group: otherID},
			dirMode: 0o750, sockMode: 0o660, gid: otherID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			old := syscall.Umask(tc.umask)
			defer syscall.Umask(old)
			cfg := tc.cfg
			cfg.Path = sockPath(t)
			l, err := Listen(context.Background(), cfg)
			is.NoErr(err)
			defer l.Close()
			is.Equal(umask(), tc.umask) // unchanged by Listen

			fi, st := statOf(t, cfg.Path)
			is.Equal(fi.Mode().Type(), os.ModeSocket)
			is.Equal(fi.Mode().Perm(), tc.sockMode)
			is.Equal(int(st.Gid), tc.gid)
			di, dst := statOf(t, filepath.Dir(cfg.Path))
			is.Equal(di.Mode().Perm(), tc.dirMode)
			is.Equal(int(dst.Uid), os.Geteuid())
			li, _ := statOf(t, cfg.Path+".lock")
			is.Equal(li.Mode().Perm()&0o077, os.FileMode(0))
		})
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		replace func(t *testing.T, path string) // after Listen, before Close
		check   func(is *is.I, path string)
	}{
		{name: "removes own socket", check: func(is *is.I, path string) {
			_, err := os.Lstat(path)
			is.True(errors.Is(err, os.ErrNotExist))
			_, err = os.Lstat(path + ".lock")
			is.NoErr(err) // the lock file stays
		}},
		{name: "leaves a replacing file", replace: func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("new"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, check: func(is *is.I, path string) {
			b, err := os.ReadFile(path)
			is.NoErr(err)
			is.Equal(string(b), "new")
		}},
		{name: "leaves a replacing socket", replace: func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			ul := rawListen(t, path)
			t.Cleanup(func() { ul.Close() })
		}, check: func(is *is.I, path string) {
			c, err := Dial(context.Background(), path)
			is.NoErr(err)
			c.Close()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := sockPath(t)
			l, err := Listen(context.Background(), Config{Path: path, Group: -1})
			is.NoErr(err)
			if tc.replace != nil {
				tc.replace(t, path)
			}
			is.NoErr(l.Close())
			is.NoErr(l.Close()) // idempotent
			_, err = l.Accept()
			is.True(errors.Is(err, net.ErrClosed))
			tc.check(is, path)
		})
	}
}

func TestDialErrors(t *testing.T) {
	t.Parallel()
	root := tmpRoot(t)
	stale := filepath.Join(root, "stale.sock")
	rawListen(t, stale).Close()
	tests := []struct {
		name, path, code string
		retry            wire.Retry
	}{
		{name: "missing", path: filepath.Join(root, "none.sock"), code: wire.CodeUnavailable, retry: wire.RetrySafe},
		{name: "refused", path: stale, code: wire.CodeUnavailable, retry: wire.RetrySafe},
		{name: "relative", path: "x.sock", code: CodeConfigInvalid, retry: wire.RetryNever},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			c, err := Dial(context.Background(), tc.path)
			is.True(c == nil)
			is.Equal(wire.CodeOf(err), tc.code)
			is.Equal(wire.AsError(err).Retry, tc.retry)
		})
	}
}
