package units

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// ownerOf returns fi's uid and gid as strings.
func ownerOf(fi os.FileInfo) (string, string) {
	st := fi.Sys().(*syscall.Stat_t)
	return strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
}

// syncBuffer is a bytes.Buffer safe for a process's writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// notifySocket is a fake service manager's NOTIFY_SOCKET.
func notifySocket(t *testing.T, dir string) (*net.UnixConn, string) {
	t.Helper()
	path := filepath.Join(dir, "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, path
}

// readNotify reads one datagram within d.
func readNotify(c *net.UnixConn, d time.Duration) (string, error) {
	buf := make([]byte, 4096)
	c.SetReadDeadline(time.Now().Add(d))
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// tmpfilesCredentials is the content hostkit.tmpfiles.conf gives
// /etc/hostkit/secretd-credentials.json, which the secretd unit loads as
// the hostkit-credentials.json credential.
func tmpfilesCredentials(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "systemd", "hostkit.tmpfiles.conf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 7 && fields[0] == "f" && fields[1] == "/etc/hostkit/secretd-credentials.json" {
			return strings.Join(fields[6:], " ")
		}
	}
	t.Fatal("hostkit.tmpfiles.conf does not create /etc/hostkit/secretd-credentials.json")
	return ""
}

// waitExit waits for cmd to exit within d.
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
		t.Fatalf("%s did not exit within %s", cmd.Path, d)
		return nil
	}
}

// TestSecretdNotifyAndWatchdog runs a real secretd as its unit does —
// Type=notify under a watchdog, the group socket (-socket-group), and the
// systemd credentials directory holding the metadata tmpfiles.d installs —
// against a real NOTIFY_SOCKET. READY=1 comes once, after the socket
// answers; WATCHDOG=1 follows at about half WATCHDOG_USEC; SIGTERM brings
// STOPPING=1 and a clean exit.
func TestSecretdNotifyAndWatchdog(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := shortDir(t)
	ns, nsPath := notifySocket(t, dir)
	creds := filepath.Join(dir, "creds")
	is.NoErr(os.Mkdir(creds, 0o700))
	is.NoErr(os.WriteFile(filepath.Join(creds, "hostkit-credentials.json"), []byte(tmpfilesCredentials(t)), 0o400))
	root := filepath.Join(dir, "r")
	gid := strconv.Itoa(os.Getgid())

	cmd := exec.Command(filepath.Join(binDir, "secretd"), "-root", root, "-socket-group", gid)
	cmd.Env = append(cleanEnv(), "NOTIFY_SOCKET="+nsPath, "WATCHDOG_USEC=200000",
		"CREDENTIALS_DIRECTORY="+creds)
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

	msg, err := readNotify(ns, 20*time.Second)
	if err != nil {
		t.Fatalf("no READY=1: %v\nstderr:\n%s", err, stderr.String())
	}
	is.Equal(msg, "READY=1") // the first message
	// READY=1 means serving: the socket answers at once, in group mode.
	sock := filepath.Join(root, "run", "secretd", "api.sock")
	c := rpc.NewClient(sock, 5*time.Second)
	defer c.Close()
	h, err := healthapi.Get(context.Background(), c)
	is.NoErr(err)
	is.Equal(h.Status, "ok")
	fi, err := os.Lstat(sock)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o660)) // -socket-group: 0660
	fi, err = os.Lstat(filepath.Dir(sock))
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o750))            // and a 0750 directory
	is.True(strings.Contains(stderr.String(), `"systemd":0`)) // the tmpfiles metadata was read: no credentials

	start := time.Now()
	watchdogs := 0
	for time.Since(start) < 700*time.Millisecond {
		msg, err := readNotify(ns, time.Second)
		is.NoErr(err)
		is.Equal(msg, "WATCHDOG=1") // nothing but keep-alives while serving
		watchdogs++
	}
	t.Logf("%d WATCHDOG=1 in %s", watchdogs, time.Since(start))
	is.True(watchdogs >= 3 && watchdogs <= 12) // about every 100 ms

	is.NoErr(cmd.Process.Signal(syscall.SIGTERM))
	for {
		msg, err := readNotify(ns, 10*time.Second)
		if err != nil {
			t.Fatalf("no STOPPING=1 after SIGTERM: %v\nstderr:\n%s", err, stderr.String())
		}
		if msg == "STOPPING=1" {
			break
		}
		is.Equal(msg, "WATCHDOG=1")
	}
	err = waitExit(t, cmd, 15*time.Second)
	exited = true
	if err != nil {
		t.Fatalf("secretd exit: %v\nstderr:\n%s", err, stderr.String())
	}
	_, err = os.Lstat(sock)
	is.True(errors.Is(err, os.ErrNotExist)) // its own socket removed on a clean stop
}

// TestHelperSocketActivation runs the real containerization-helper under
// systemd-socket-activate, as hostkit-containerization-helper.socket does:
// the helper starts on the first connection, serves health on the passed
// socket (not one of its own), reports READY=1, and stops cleanly.
func TestHelperSocketActivation(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := shortDir(t)
	ns, nsPath := notifySocket(t, dir)
	passed := filepath.Join(dir, "helper.sock")
	root := filepath.Join(dir, "r")
	cmd := exec.Command("/usr/bin/systemd-socket-activate", "-l", passed,
		"-E", "NOTIFY_SOCKET="+nsPath,
		filepath.Join(binDir, "containerization-helper"), "-root", root, "-allow-exe", testExe(t))
	cmd.Env = cleanEnv()
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	is.NoErr(cmd.Start())
	exited := false
	defer func() {
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Lstat(passed); err == nil && fi.Mode().Type() == os.ModeSocket {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared; output:\n%s", passed, stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := os.Lstat(filepath.Join(root, "log", "helper"))
	is.True(errors.Is(err, os.ErrNotExist)) // on demand: nothing runs before the first connection

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := rpc.NewClient(passed, 10*time.Second)
	defer c.Close()
	h, err := healthapi.Get(ctx, c)
	for wire.CodeOf(err) == wire.CodeUnavailable && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		h, err = healthapi.Get(ctx, c)
	}
	if err != nil {
		t.Fatalf("health on the activated socket: %v\noutput:\n%s", err, stderr.String())
	}
	is.Equal(h.Status, "ok")
	msg, err := readNotify(ns, 10*time.Second)
	is.NoErr(err)
	is.Equal(msg, "READY=1")
	is.True(strings.Contains(stderr.String(), `"msg":"daemon.socket_activated"`))
	_, err = os.Lstat(filepath.Join(root, "run", "helper", "api.sock"))
	is.True(errors.Is(err, os.ErrNotExist)) // the passed socket was used, no second one made

	is.NoErr(cmd.Process.Signal(syscall.SIGTERM)) // systemd-socket-activate exec'd the helper: same pid
	err = waitExit(t, cmd, 15*time.Second)
	exited = true
	if err != nil {
		t.Fatalf("helper exit: %v\noutput:\n%s", err, stderr.String())
	}
	fi, err := os.Lstat(passed)
	is.NoErr(err)
	is.Equal(fi.Mode().Type(), os.ModeSocket) // the passed socket belongs to the manager: left alone
}

// testExe is this test binary: the helper authenticates its peer's
// executable, and this test calls health itself.
func testExe(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return self
}
