package peerauth

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

const busybox = "/bin/busybox"

// copyExe copies src to dir/name with mode 0755, with extra bytes
// appended (an ELF file runs the same with trailing bytes, but hashes
// differently).
func copyExe(t *testing.T, src, dst string, extra []byte) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := dst + ".new"
	if err := os.WriteFile(tmp, append(b, extra...), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// sleeper starts exe as "busybox sleep 60" and returns its pid; the
// process is killed and reaped at the end of the test.
func sleeper(t *testing.T, exe string) int {
	t.Helper()
	cmd := exec.Command(exe, "sleep", "60")
	cmd.Args[0] = "busybox"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Wait for the exec to finish: /proc/<pid>/exe names the new binary.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if l, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe"); l == exe {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cmd.Process.Pid
}

type denial struct {
	mu      sync.Mutex
	reasons []string
}

func (d *denial) record(_ sock.Peer, reason, _ string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reasons = append(d.reasons, reason)
}

func (d *denial) last() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.reasons) == 0 {
		return ""
	}
	return d.reasons[len(d.reasons)-1]
}

func TestAuthenticateRealProcesses(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(busybox); err != nil {
		t.Fatalf("%s is missing: scripts/setup installs busybox-static", busybox)
	}
	dir := t.TempDir()
	d := &denial{}
	a, err := New(Config{AllowPaths: []string{busybox}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnDenied: d.record})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, exe string) int // returns the pid to check
		reason string                             // "" = allowed
	}{
		{"allowlisted copy", func(t *testing.T, exe string) int {
			copyExe(t, busybox, exe, nil)
			return sleeper(t, exe)
		}, ""},
		{"not on the allowlist", func(t *testing.T, exe string) int {
			copyExe(t, busybox, exe, []byte("other build"))
			return sleeper(t, exe)
		}, ReasonNotAllowed},
		{"replaced after start", func(t *testing.T, exe string) int {
			copyExe(t, busybox, exe, nil)
			pid := sleeper(t, exe)
			copyExe(t, busybox, exe, []byte("replacement")) // renamed over the running binary's path
			return pid
		}, ReasonReplaced},
		{"replaced by an identical copy", func(t *testing.T, exe string) int {
			copyExe(t, busybox, exe, nil)
			pid := sleeper(t, exe)
			copyExe(t, busybox, exe, nil) // same bytes, new inode: still refused
			return pid
		}, ReasonReplaced},
		{"edited between runs with its mtime set back", func(t *testing.T, exe string) int {
			// The cache must not vouch for new bytes behind an old
			// (dev, ino, size, mtime): run it once (cached), stop it,
			// patch it in place, restore the mtime, run it again.
			copyExe(t, busybox, exe, []byte("build-A"))
			fi, err := os.Stat(exe)
			if err != nil {
				t.Fatal(err)
			}
			pid := sleeper(t, exe)
			// Cache the allowed hash of this very file version first.
			a.store(keyOfPath(t, exe), allowedHash(t, a))
			_ = syscall.Kill(pid, syscall.SIGKILL)
			waitGone(t, pid)
			// The killed process may hold the file's write denial a moment
			// after /proc stops naming it: ETXTBSY passes.
			var f *os.File
			for end := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				f, err = os.OpenFile(exe, os.O_WRONLY, 0)
				if err == nil || !errors.Is(err, syscall.ETXTBSY) || time.Now().After(end) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("build-B"), fi.Size()-7); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := os.Chtimes(exe, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			return sleeper(t, exe)
		}, ReasonNotAllowed},
		{"deleted after start", func(t *testing.T, exe string) int {
			copyExe(t, busybox, exe, nil)
			pid := sleeper(t, exe)
			if err := os.Remove(exe); err != nil {
				t.Fatal(err)
			}
			return pid
		}, ReasonDeleted},
		{"exited peer", func(t *testing.T, exe string) int {
			cmd := exec.Command(busybox, "true")
			if err := cmd.Run(); err != nil {
				t.Fatal(err)
			}
			return cmd.Process.Pid
		}, ReasonUnreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			exe := filepath.Join(dir, filepath.Base(t.Name()))
			pid := tc.setup(t, exe)
			err := a.Authenticate(sock.Peer{PID: int32(pid), UID: uint32(os.Getuid())})
			if tc.reason == "" {
				is.NoErr(err)
				// The second check of the same file is answered from the cache.
				is.NoErr(a.Authenticate(sock.Peer{PID: int32(pid), UID: uint32(os.Getuid())}))
				return
			}
			is.Equal(wire.CodeOf(err), wire.CodePeerDenied)
			is.Equal(wire.AsError(err).Msg, "peer is not allowed") // the reason is never sent
			is.Equal(d.last(), tc.reason)
		})
	}
}

func TestNewAllowlist(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	self := filepath.Join(dir, "containerization-helper")
	copyExe(t, busybox, filepath.Join(dir, "hostctl"), nil)
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantN   int
		wantErr bool
	}{
		{"default neighbours", Config{Self: self}, 1, false},
		{"explicit replaces the default", Config{Self: self, AllowSHA256: []string{"sha256:" + string(bytes.Repeat([]byte("ab"), 32))}}, 1, false},
		{"bad digest", Config{AllowSHA256: []string{"abc"}}, 0, true},
		{"missing path", Config{AllowPaths: []string{filepath.Join(dir, "nope")}}, 0, true},
		{"nothing next to the helper", Config{Self: filepath.Join(t.TempDir(), "x")}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			tc.cfg.Logger = log
			a, err := New(tc.cfg)
			is.Equal(err != nil, tc.wantErr)
			if err == nil {
				is.Equal(len(a.Allowed()), tc.wantN)
			}
		})
	}
}

// keyOfPath is the cache key of the file at path.
func keyOfPath(t *testing.T, path string) fileKey {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return keyOf(&st)
}

// allowedHash is one hash on a's allowlist.
func allowedHash(t *testing.T, a *Authenticator) [32]byte {
	t.Helper()
	for h := range a.allow {
		return h
	}
	t.Fatal("empty allowlist")
	return [32]byte{}
}

// waitGone waits until pid no longer runs its program (killed and reaped
// by sleeper's cleanup only at the end, so a zombie counts as gone).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil {
			return
		}
	}
	t.Fatalf("pid %d still runs", pid)
}
