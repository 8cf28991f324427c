//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	api "hostkit.dev/lib/api/supervisordapi"
)

// holdersOf lists live holder processes started for the holder directory
// hdir (idle or assigned).
func holdersOf(hdir string) []int {
	return processesMentioning("holder\x00-hdir\x00" + hdir + "\x00")
}

// waitIdle waits until n holders of hdir other than the excluded ones
// wait for an assignment and returns them. A holder has got that far once
// its fd 3 (the channel as passed, which it duplicates and closes) is gone.
// The same n must be seen on two polls in a row, each still alive after
// its fd was looked at: a process that ended between the listing and the
// look has no fd 3 either, and must not pass for an idle holder.
func waitIdle(t *testing.T, hdir string, n int, exclude ...int) []int {
	t.Helper()
	var last []int
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var idle []int
		for _, pid := range holdersOf(hdir) {
			if _, err := os.Lstat(fmt.Sprintf("/proc/%d/fd/3", pid)); err == nil || slices.Contains(exclude, pid) || !alive(pid) {
				continue
			}
			idle = append(idle, pid)
		}
		if len(idle) == n && slices.Equal(idle, last) {
			return idle
		}
		last = idle
		if time.Now().After(end) {
			t.Fatalf("want %d idle holders, have %v", n, idle)
		}
	}
}

// TestHolderPoolHoldsNothingAndLeavesNothing guards the holder pool: an
// idle holder holds nothing of any instance (no socket, no file of the
// state directory, no agent uid, only PATH in its environment, its own
// session) and does not count as an instance; a provision takes one and
// the pool refills; idle holders end with supervisord, after kill -9 as
// after SIGTERM, while assigned holders (instances) survive both.
func TestHolderPoolHoldsNothingAndLeavesNothing(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes", "-holder-pool", "3")
	hdir := filepath.Join(e.root, "run", "supervisord", "h")
	idle := waitIdle(t, hdir, 3)
	for _, pid := range idle {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		is.NoErr(err)
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
		is.Equal(f[1], strconv.Itoa(e.cmd.Process.Pid)) // supervisord's child...
		is.Equal(f[3], strconv.Itoa(pid))               // ...in a session of its own
		environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		is.NoErr(err)
		is.Equal(string(environ), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\x00")
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		is.NoErr(err)
		for _, fd := range fds {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			is.True(!strings.HasPrefix(target, e.root)) // no instance file, no socket path
			if n, _ := strconv.Atoi(fd.Name()); n > 2 {
				info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
				is.NoErr(err)
				var flags int64
				for _, l := range strings.Split(string(info), "\n") {
					if v, ok := strings.CutPrefix(l, "flags:"); ok {
						flags, _ = strconv.ParseInt(strings.TrimSpace(v), 8, 64)
					}
				}
				is.True(flags&syscall.O_CLOEXEC != 0) // nothing reaches an agent
			}
		}
	}
	ents, _ := os.ReadDir(hdir)
	is.Equal(len(ents), 0) // no holder socket yet
	h, err := healthapi.GetAll(context.Background(), e.rc)
	is.NoErr(err)
	is.Equal(fmt.Sprint(h["instances"]), "map[]")

	in := e.provision(api.ProvisionRequest{PTY: true, Command: []string{"sh", "-c", "echo pooled-$((6*7)); exec sleep 1000"}})
	e.waitLog(in.InstanceID, "pooled-42", 5*time.Second)
	// The shell has printed; its exec of sleep may still be under way.
	waitFor(t, 10*time.Second, func() bool {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", in.PID))
		return string(cmd) == "sleep\x001000\x00"
	})
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", in.PID))
	is.NoErr(err)
	for _, fd := range fds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", in.PID, fd.Name()))
		t.Logf("agent fd %s: %s", fd.Name(), target)
	}
	is.Equal(len(fds), 3) // the terminal on 0-2, nothing inherited
	hpid := holderOf(t, e, in.InstanceID)
	is.True(slices.Contains(idle, hpid)) // it took an idle holder
	idle = waitIdle(t, hdir, 3, hpid)    // and the pool refilled

	e.kill() // kill -9: idle holders see their channel close and end
	for end := time.Now().Add(5 * time.Second); len(waitGone(idle)) > 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	is.Equal(waitGone(idle), []int(nil))
	is.True(alive(hpid)) // the instance's holder survives
	e.boot()
	st := e.waitState(in.InstanceID, api.StateRunning, 5*time.Second)
	is.Equal(st.PID, in.PID)
	idle = waitIdle(t, hdir, 3, hpid)

	is.NoErr(e.cmd.Process.Signal(syscall.SIGTERM)) // clean shutdown ends them too
	for end := time.Now().Add(5 * time.Second); (alive(e.cmd.Process.Pid) || len(waitGone(idle)) > 0) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	is.Equal(waitGone(idle), []int(nil))
	is.True(alive(hpid))
	e.boot()
	is.NoErr(e.c.Destroy(context.Background(), in.InstanceID))
	is.Equal(len(treeOf(in.InstanceID)), 0)
}

// waitGone returns the pids still alive.
func waitGone(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// TestProvisionWithoutPool guards -holder-pool 0: each provision starts
// its own holder, which behaves the same (environment stripped, output
// kept, stop leaves nothing).
func TestProvisionWithoutPool(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes", "-holder-pool", "0")
	e.envs = append(e.envs, "NOTIFY_SOCKET=/tmp/nope")
	in := e.provision(api.ProvisionRequest{Command: []string{"sh", "-c", "env; echo fresh-holder-done; sleep 1000"}})
	out := e.waitLog(in.InstanceID, "fresh-holder-done", 5*time.Second)
	is.True(!strings.Contains(out, "NOTIFY_SOCKET"))
	is.Equal(len(holdersOf(filepath.Join(e.root, "run", "supervisord", "h"))), 1) // only the instance's
	st, err := e.c.Stop(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateStopped)
	is.Equal(len(treeOf(in.InstanceID)), 0)
}
