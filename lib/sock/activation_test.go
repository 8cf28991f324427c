package sock

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestActivatedNothingPassed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ls, err := Activated()
	is.NoErr(err)
	is.True(ls == nil)
	ls, err = Activated("api")
	is.NoErr(err)
	is.True(ls == nil)
}

// TestActivated passes descriptors to a re-executed child the way systemd
// does (fd 3 on, LISTEN_FDS, LISTEN_FDNAMES); the child sets LISTEN_PID to
// its own pid, which is what sd_listen_fds(3) compares it with.
func TestActivated(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unixFile := func(t *testing.T, path string) *os.File {
		ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		defer ul.Close()
		ul.SetUnlinkOnClose(false)
		f, err := ul.File()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	tests := []struct {
		name  string
		file  func(t *testing.T, path string) *os.File // nil: nothing passed
		names string
		want  string // first line of the child's report
	}{
		{name: "named", file: unixFile, names: "api", want: "listeners 1"},
		{name: "unnamed", file: unixFile, want: "listeners 1"},
		{name: "missing name", file: unixFile, names: "other", want: "error " + CodeActivationInvalid},
		{name: "nothing passed", want: "none"},
		{name: "regular file", want: "error " + CodeActivationInvalid, file: func(t *testing.T, path string) *os.File {
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}},
		{name: "tcp listener", want: "error " + CodeActivationInvalid, file: func(t *testing.T, _ string) *os.File {
			tl, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer tl.Close()
			f, err := tl.File()
			if err != nil {
				t.Fatal(err)
			}
			return f
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(tmpRoot(t), "a.sock")
			cmd := helper(exe, "activated", helperNamesEnv+"="+tc.names)
			if tc.file != nil {
				f := tc.file(t, path)
				defer f.Close()
				cmd.ExtraFiles = []*os.File{f}
				cmd.Env = append(cmd.Env, "LISTEN_FDS=1", "LISTEN_FDNAMES=api")
			}
			checkActivatedChild(t, cmd, path, tc.want)
		})
	}
}

// TestActivatedSystemd runs the child under systemd-socket-activate(1), the
// real implementation of the protocol, when it is installed.
func TestActivatedSystemd(t *testing.T) {
	t.Parallel()
	ssa, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Fatal("systemd-socket-activate not installed: scripts/setup installs it (Debian package systemd)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tmpRoot(t), "a.sock")
	cmd := exec.Command(ssa, "-l", path, "--fdname=api",
		"-E", helperEnv+"=activated", "-E", helperNamesEnv+"=api", "-E", "GORACE=atexit_sleep_ms=0",
		exe, "-test.run=^$")
	// It execs the child only once a connection is waiting.
	checkActivatedChild(t, cmd, path, "listeners 1")
}

// checkActivatedChild starts cmd, connects to path when the child has
// listeners, and checks that the child saw this process as its peer.
func checkActivatedChild(t *testing.T, cmd *exec.Cmd, path, want string) {
	is := is.New(t)
	out, err := cmd.StdoutPipe()
	is.NoErr(err)
	is.NoErr(cmd.Start())
	defer func() { is.NoErr(cmd.Wait()) }()
	if want == "listeners 1" {
		c := dialWhenReady(t, path)
		defer c.Close()
		r := bufio.NewReader(out)
		is.Equal(readLine(t, r), want)
		reply, err := bufio.NewReader(c).ReadString('\n')
		is.NoErr(err)
		is.Equal(reply, fmt.Sprintf("%d %d\n", os.Getpid(), os.Getuid()))
		is.Equal(readLine(t, r), "path kept") // FromListener's Close left it
		return
	}
	is.Equal(readLine(t, bufio.NewReader(out)), want)
}

// dialWhenReady dials path, waiting up to 10s for it to appear.
func dialWhenReady(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := Dial(context.Background(), path)
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
