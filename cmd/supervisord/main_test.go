//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"hostkit.dev/lib/proctest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/api/healthapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/buildtest"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// binary is the supervisord binary, built by TestMain once for all test
// processes (buildtest) and linked into a directory of this run that
// every uid may traverse: holders and agents run as other uids, and the
// other binaries the tests need are linked beside it.
var binary string

func TestMain(m *testing.M) {
	if os.Getenv(tclientEnv) != "" {
		os.Exit(tclientMain()) // an agent of TestTransparentEgressStreams
	}
	// Orphaned descendants (of holders killed on purpose) are reparented
	// to this process; reap them so no zombie outlives a test.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("/tmp", "hkbin")
	if err != nil {
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	if err := buildtest.Install(context.Background(), dir, "."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "supervisord")
	stop := make(chan struct{})
	go reapOrphans(stop)
	code := m.Run()
	close(stop)
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

// reapOrphans reaps children that are not the daemons tests start
// (those are waited for by exec.Cmd): only pids reparented to us. A
// program a test runs itself (go build, umoci, runc) is a zombie for the
// moment between its exit and its exec.Cmd's wait, and reaping it then
// would steal its status (the wait fails with ECHILD, "waitid: no child
// processes"); on a loaded machine that moment passed 50 ms. Such a
// program runs in this process's session, where every orphan of ours
// (holders, agents) has a session of its own: a zombie of another
// session is reaped once two ticks (50 ms apart) saw it, one of our own
// session only after 2 s.
func reapOrphans(stop chan struct{}) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	self, _ := unix.Getsid(0)
	seen := map[int]int{} // zombie → ticks that saw it
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := map[int]int{}
		for _, pid := range childrenOf(os.Getpid()) {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil || !zombieOrphan(st) {
				continue
			}
			now[pid] = seen[pid] + 1
			if sid, _ := unix.Getsid(pid); (sid != self && now[pid] >= 2) || now[pid] >= 40 {
				var ws unix.WaitStatus
				unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			}
		}
		seen = now
	}
}

// daemons holds the pids of daemons tests started (exec.Cmd waits for
// them); every other zombie child is an orphan to reap.
var daemons sync.Map

// zombieOrphan reports whether a stat line is a zombie that is not one of
// our daemons.
func zombieOrphan(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i <= 0 || i+2 >= len(stat) || stat[i+2] != 'Z' {
		return false
	}
	pid, _ := strconv.Atoi(strings.Fields(string(stat))[0])
	_, ours := daemons.Load(pid)
	return !ours
}

func childrenOf(ppid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+2:]))
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// env is a running supervisord under a temporary root.
type env struct {
	t    *testing.T
	root string
	args []string
	cmd  *exec.Cmd
	c    *api.Client
	rc   *rpc.Client
	envs []string
	// stderrs holds each boot's standard error, logged if the test fails.
	stderrs []*lockedBuf
	bin     string // the supervisord binary to boot; "" = binary
}

// start starts supervisord under a new root with extra flags.
func start(t *testing.T, extra ...string) *env {
	t.Helper()
	root, err := os.MkdirTemp("/tmp", "hk")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o755)
	// No egressd here: instances without credentials start without a
	// bundle (egress_test.go runs the real secretd and egressd).
	e := &env{t: t, root: root, args: append([]string{"-root", root, "-egress-required", "no"}, extra...)}
	e.boot()
	t.Cleanup(func() {
		if t.Failed() { // what each boot of supervisord said, for the failure's story
			for i, b := range e.stderrs {
				t.Logf("supervisord boot %d stderr:\n%s", i+1, b)
			}
		}
		e.destroyAll()
		e.kill()
		os.RemoveAll(root)
	})
	return e
}

func (e *env) sock() string { return filepath.Join(e.root, "run", "supervisord", "api.sock") }

// boot starts the daemon and waits for its socket.
func (e *env) boot() {
	e.t.Helper()
	exe := binary
	if e.bin != "" {
		exe = e.bin
	}
	e.cmd = exec.Command(exe, e.args...)
	e.cmd.Env = append(os.Environ(), e.envs...)
	stderr := &lockedBuf{}
	e.cmd.Stderr = stderr
	e.stderrs = append(e.stderrs, stderr)
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	daemons.Store(e.cmd.Process.Pid, true)
	go e.cmd.Wait()
	e.rc = rpc.NewClient(e.sock(), 30*time.Second)
	e.c = api.NewClient(e.rc)
	for i := 0; i < 500; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := healthapi.Get(ctx, e.rc)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("supervisord did not start: %s", e.cmd.Stderr)
}

// kill kills the daemon with SIGKILL (holders survive).
func (e *env) kill() {
	if e.cmd != nil && e.cmd.Process != nil {
		e.cmd.Process.Kill()
		for i := 0; i < 200 && alive(e.cmd.Process.Pid); i++ {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if e.rc != nil {
		e.rc.Close()
	}
	waitLockFree(e.sock() + ".lock")
}

// waitLockFree waits (up to 2 s) until nobody holds the flock on path. A
// holder being started when supervisord was killed holds a copy of the
// daemon's close-on-exec lock fd from fork until its exec, a few ms.
func waitLockFree(path string) {
	for i := 0; i < 400; i++ {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		unix.Close(fd) // also releases the lock
		if err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// destroyAll destroys every instance the daemon lists. A destroy that
// fails (on a loaded machine one can take longer than the
// client's timeout) is tried again until the list is empty, for up to 60
// s; what is still there then fails the test that left it, by name
// (otherwise its holders would be reported only as processes left behind
// by the package). A daemon that is not running has nothing to list.
func (e *env) destroyAll() {
	deadline := time.Now().Add(60 * time.Second)
	for {
		l, err := e.c.List(context.Background())
		if err != nil && wire.CodeOf(err) == wire.CodeUnavailable {
			return
		}
		if err == nil && len(l.Instances) == 0 {
			return
		}
		var left []string
		if err == nil {
			for _, in := range l.Instances {
				left = append(left, in.InstanceID)
				e.c.Destroy(context.Background(), in.InstanceID)
			}
		}
		if time.Now().After(deadline) {
			e.t.Errorf("instances %v still there after 60 s of destroys (list: %v)", left, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// provision provisions with defaults: started, working dir /tmp.
func (e *env) provision(req api.ProvisionRequest) *api.Instance {
	e.t.Helper()
	req.Start = true
	if req.WorkingDir == "" {
		req.WorkingDir = "/tmp"
	}
	if req.StopTimeoutMS == 0 {
		req.StopTimeoutMS = 1000
	}
	in, err := e.c.Provision(context.Background(), &req)
	if err != nil {
		e.t.Fatalf("provision %v: %v", req.Command, err)
	}
	return in
}

// waitState polls status until the instance is in state.
func (e *env) waitState(id, state string, d time.Duration) *api.Instance {
	e.t.Helper()
	end := time.Now().Add(d)
	for {
		in, err := e.c.Status(context.Background(), id)
		if err == nil && in.State == state {
			return in
		}
		if time.Now().After(end) {
			e.t.Fatalf("instance %s: want state %s, have %+v (%v)", id, state, in, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLog polls the log until it holds want.
func (e *env) waitLog(id, want string, d time.Duration) string {
	e.t.Helper()
	end := time.Now().Add(d)
	for {
		l, err := e.c.Logs(context.Background(), &api.LogsRequest{InstanceID: id})
		if err == nil && strings.Contains(string(l.Data), want) {
			return string(l.Data)
		}
		if time.Now().After(end) {
			e.t.Fatalf("instance %s: log lacks %q: %q (%v)", id, want, l, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// treeOf lists live processes whose environment names instance id.
func treeOf(id string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	marker := []byte("HOSTKIT_INSTANCE_ID=" + id + "\x00")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(b, marker) {
			out = append(out, pid)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && b[i+2] != 'Z'
}

// code asserts err carries code.
func code(t *testing.T, err error, want string) {
	t.Helper()
	if wire.CodeOf(err) != want {
		t.Fatalf("want %s, got %v", want, err)
	}
}

var _ = is.New

func syscallKill(pid int) error { return unix.Kill(pid, unix.SIGKILL) }

// holderOf returns instance id's holder pid from its metadata.
func holderOf(t *testing.T, e *env, id string) int {
	t.Helper()
	md, err := store.Store{Root: e.root + "/state/supervisord/instances"}.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	return md.Holder.PID
}
