package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/helperapi"
)

// A restart stops the container with SIGTERM first: an init that exits
// on it is seen the moment it exits (long before the plan's stop timeout),
// and what it printed on its way out stays in the console log. An init
// that ignores SIGTERM is covered by TestLifecycle (SIGKILL after the
// timeout).
func TestStopGraceful(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, s, img := helperSession(t)
	ctx := ctxT(t, 2*time.Minute)

	c := s.create(t, img, trapTerm, []string{"PATH=/bin"}, true)
	is.Equal(c.Status, "running")
	waitLog(t, s, c.ContainerID, "up")

	p, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindRestart, ContainerID: c.ContainerID, Context: s.cx, StopTimeoutMS: 60_000})
	is.NoErr(err)
	begin := time.Now()
	c2, err := s.c.Restart(ctx, newIdem(t), &helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s.cx, PlanHash: p.PlanHash})
	is.NoErr(err)
	is.True(time.Since(begin) < 30*time.Second) // not the 60 s stop timeout
	is.Equal(c2.Status, "running")
	is.True(c2.Pid != c.Pid)
	waitLog(t, s, c.ContainerID, "got-term")
}

// trapTerm is an init that prints "up" once its SIGTERM trap is set and
// "got-term" when it handles SIGTERM.
var trapTerm = []string{"/bin/sh", "-c", "trap 'echo got-term; exit 0' TERM; echo up; sleep 600 & wait"}

// waitLog waits until id's console log holds want.
func waitLog(t *testing.T, s *session, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := s.c.Logs(ctxT(t, 10*time.Second), &helperapi.LogsRequest{ContainerID: id})
		if err == nil && strings.Contains(string(l.Data), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("console log of %s never held %q (err %v)", id, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A paused container is stopped with SIGKILL at once (through the
// runtime, which thaws it): its frozen init could not handle a SIGTERM, so
// waiting out the stop timeout would only delay the delete. A running one
// gets its SIGTERM and exits on it (TestStopGraceful).
func TestStopPausedKillsAtOnce(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h, s, img := helperSession(t)
	c := s.create(t, img, trapTerm, []string{"PATH=/bin"}, true)
	waitLog(t, s, c.ContainerID, "up")
	runc(t, runtimeRoot(h.root), "pause", c.ContainerID)

	begin := time.Now()
	d, _ := s.deleteForced(t, c.ContainerID, newIdem(t), 60_000)
	is.True(time.Since(begin) < 30*time.Second) // not the 60 s stop timeout
	is.True(d.Deleted)
	is.True(!strings.Contains(string(d.LogTail), "got-term")) // no SIGTERM handled
	obs, err := s.c.Observe(ctxT(t, time.Minute))
	is.NoErr(err)
	is.Equal(len(obs.Containers), 0)
}

// A paused container's init pid is the runtime's word only (runc does
// not check a paused init's start time). When that pid now belongs to
// another process — the init died unreaped by the helper (a new helper
// after a crash does not adopt it) and its pid was reused — a stop must not
// signal that process. The freezer is set by hand on the emptied cgroup,
// as a cgroup v2 host can leave it (a frozen task can die there); the pid
// is reused through ns_last_pid. The refused side of TestStopGraceful.
func TestStopPausedReusedPidUntouched(t *testing.T) {
	// Another task (a thread of any process) can take the dead init's pid
	// before this test does; the scenario then starts again with a new
	// container, up to three times.
	for range 3 {
		if pausedReusedPid(t) {
			return
		}
	}
	t.Fatal("three dead inits' pids were each taken by another task before the test could reuse them")
}

// pausedReusedPid runs TestStopPausedReusedPidUntouched's scenario once
// and reports false (having deleted its container) when another task
// took the init's pid first.
func pausedReusedPid(t *testing.T) bool {
	is := is.New(t)
	img := fixture(t)
	root := newRoot(t)
	h1 := startHelper(t, "", root, "-allow-exe", selfExe(t), "-idle-timeout", "0")
	s1 := newSession(t, h1)
	c := s1.create(t, img, trapTerm, []string{"PATH=/bin"}, true)
	waitLog(t, s1, c.ContainerID, "up")
	pid := int(c.Pid)
	h1.kill9() // the init is reparented to this test binary, a child subreaper
	h2 := startHelper(t, "", root, "-allow-exe", selfExe(t), "-idle-timeout", "0")
	s2 := newSession(t, h2)
	s2.cx.InstanceID = s1.cx.InstanceID
	is.NoErr(unix.Kill(pid, unix.SIGKILL))
	var ws unix.WaitStatus
	_, err := unix.Wait4(pid, &ws, 0, nil)
	is.NoErr(err)

	victim := reusePid(t, pid)
	if victim == nil {
		d, _ := s2.deleteForced(t, c.ContainerID, newIdem(t), 1500)
		is.True(d.Deleted)
		return false
	}
	exited := make(chan error, 1)
	go func() { exited <- victim.Wait() }()
	fz := filepath.Join("/sys/fs/cgroup/freezer/hostkit", c.ContainerID, "freezer.state")
	is.NoErr(os.WriteFile(fz, []byte("FROZEN"), 0))
	obs, err := s2.c.Observe(ctxT(t, time.Minute))
	is.NoErr(err)
	is.Equal(len(obs.Containers), 1)
	is.Equal(obs.Containers[0].Status, "paused") // with the dead init's pid, now the victim's

	d, _ := s2.deleteForced(t, c.ContainerID, newIdem(t), 1500)
	is.True(d.Deleted)
	select {
	case err := <-exited:
		t.Fatalf("the process that reused the init's pid %d was signalled: %v", pid, err)
	case <-time.After(500 * time.Millisecond):
	}
	is.NoErr(victim.Process.Kill())
	<-exited
	return true
}

// reusePid starts a `sleep` with pid (free now) through ns_last_pid
// (proc(5)), retrying while other processes fork first. It returns nil
// when another task holds the pid (/proc/PID exists for any task id,
// threads too): then it cannot be had.
func reusePid(t *testing.T, pid int) *exec.Cmd {
	t.Helper()
	// Any process that forks between the write and the start takes the
	// pid for a moment (other packages' tests run beside this one), so
	// try until a generous deadline rather than a count.
	tries := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); tries++ {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			return nil // a live task has it
		}
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Fatalf("ns_last_pid: %v", err)
		}
		v := exec.Command("/bin/sleep", "600")
		if err := v.Start(); err != nil {
			t.Fatal(err)
		}
		if v.Process.Pid == pid {
			return v
		}
		v.Process.Kill()
		v.Wait()
	}
	t.Fatalf("pid %d was not reused in %d tries over 30 s", pid, tries)
	return nil
}
