package sock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"go.uber.org/goleak"
	"hostkit.dev/lib/wire"
)

// Environment switches that turn the re-executed test binary into a helper
// process (see runHelper).
const (
	helperEnv      = "HK_SOCK_HELPER" // listen | listen-group | chown-same | dial | activated
	helperPathEnv  = "HK_SOCK_PATH"
	helperNamesEnv = "HK_SOCK_NAMES"
	helperGroupEnv = "HK_SOCK_GROUP"      // listen-group: the gid to ask for
	helperDenyEnv  = "HK_SOCK_DENY_CHOWN" // listen-group: "1" installs denyChown first
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	// PID 1 here does not reap orphans; adopt our descendants ourselves.
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// runHelper is the body of a re-executed child; it returns the exit status.
func runHelper(mode string) int {
	ctx := context.Background()
	path := os.Getenv(helperPathEnv)
	switch mode {
	case "listen": // hold a listener until killed
		l, err := Listen(ctx, Config{Path: path, Group: -1})
		if err != nil {
			fmt.Println("error", wire.CodeOf(err))
			return 2
		}
		defer l.Close()
		fmt.Println("ready")
		time.Sleep(time.Hour)
		return 0
	case "listen-group": // listen in the group modes, report the result and exit
		return listenGroup(ctx, path)
	case "chown-same": // a no-op chown before and after denyChown
		fmt.Println("before:", os.Lchown(path, -1, os.Getegid()))
		if err := denyChown(); err != nil {
			fmt.Fprintln(os.Stderr, "denyChown:", err)
			return 1
		}
		fmt.Println("after:", os.Lchown(path, -1, os.Getegid()))
		return 0
	case "dial": // connect, send one byte, wait for the server to hang up
		c, err := Dial(ctx, path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			return 2
		}
		defer c.Close()
		// A server that rejects us may hang up before this write lands.
		_, _ = c.Write([]byte("x"))
		_, _ = io.Copy(io.Discard, c)
		return 0
	case "activated": // a service manager sets LISTEN_PID to our pid; else we do
		if os.Getenv("LISTEN_PID") == "" {
			os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
		}
		var names []string
		if n := os.Getenv(helperNamesEnv); n != "" {
			names = strings.Split(n, ",")
		}
		return serveActivated(names)
	}
	fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
	return 1
}

// listenGroup listens on path with the group modes (0750/0660) and the gid
// in helperGroupEnv, after denyChown when helperDenyEnv is "1", and prints
// "ok <socket gid> <directory gid>" or "error <code> eperm=<whether the
// cause is EPERM> <message>".
func listenGroup(ctx context.Context, path string) int {
	gid, err := strconv.Atoi(os.Getenv(helperGroupEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen-group:", err)
		return 1
	}
	if os.Getenv(helperDenyEnv) == "1" {
		if err := denyChown(); err != nil {
			fmt.Fprintln(os.Stderr, "denyChown:", err)
			return 1
		}
	}
	l, err := Listen(ctx, Config{Path: path, DirMode: DirModeGroup, SocketMode: SocketModeGroup, Group: gid})
	if err != nil {
		var we *wire.Error
		if !errors.As(err, &we) {
			fmt.Fprintln(os.Stderr, "listen-group: untyped error:", err)
			return 1
		}
		fmt.Println("error", we.Code, "eperm="+strconv.FormatBool(errors.Is(err, syscall.EPERM)), we.Msg)
		return 0
	}
	defer l.Close()
	var gids []string
	for _, p := range []string{path, filepath.Dir(path)} {
		fi, err := os.Lstat(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "listen-group:", err)
			return 1
		}
		gids = append(gids, strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Gid), 10))
	}
	fmt.Println("ok", strings.Join(gids, " "))
	return 0
}

// serveActivated reports on stdout what Activated returned and answers one
// connection on the first listener with the peer's pid and uid.
func serveActivated(names []string) int {
	ls, err := Activated(names...)
	if err != nil {
		fmt.Println("error", wire.CodeOf(err))
		return 0
	}
	if len(ls) == 0 {
		fmt.Println("none")
		return 0
	}
	fmt.Println("listeners", len(ls))
	path := ls[0].Addr().String()
	l := FromListener(ls[0], Config{})
	c, err := l.AcceptConn()
	if err != nil {
		fmt.Println("accept", err)
		return 2
	}
	fmt.Fprintf(c, "%d %d\n", c.Peer.PID, c.Peer.UID)
	c.Close()
	l.Close()
	if _, err := os.Lstat(path); err == nil {
		fmt.Println("path kept")
	}
	return 0
}

// helper returns a command that re-executes bin (the test binary, or a copy)
// as a helper in mode with the given extra environment.
func helper(bin, mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(bin, "-test.run=^$")
	// GORACE: a -race child otherwise sleeps 1s at exit.
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// tmpRoot makes a short, world-traversable (0755) directory under /tmp,
// removed when the test ends. Socket paths must stay under MaxPathLen.
func tmpRoot(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "hk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// publicBinary copies the test binary into root with mode 0755, so a child
// running as another uid can execute it (go test's build dir is 0700).
func publicBinary(t *testing.T, root string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := filepath.Join(root, "t.bin")
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, src); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// readLine reads one line of a child's stdout.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading child output: %v (got %q)", err, line)
	}
	return strings.TrimSpace(line)
}

// statOf returns the uid, gid and identity of path (not following links).
func statOf(t *testing.T, path string) (os.FileInfo, *syscall.Stat_t) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi, fi.Sys().(*syscall.Stat_t)
}

func TestCodesSortedUnique(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for i, c := range Codes {
		is.True(strings.HasPrefix(c, "sock."))
		if i > 0 {
			is.True(Codes[i-1] < c) // sorted and unique
		}
	}
}
