//go:build linux

package main

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
)

// TestStopLeavesNoProcessOfTheTree guards against descendants that escape
// a process-group kill (setsid, double fork), ignore SIGTERM, outlive their
// leader, or fork while being killed.
func TestStopLeavesNoProcessOfTheTree(t *testing.T) {
	e := start(t, "-host-runtime-enabled", "yes")
	for _, tc := range []struct {
		name  string
		cmd   string
		procs int    // processes to wait for before stopping
		state string // state before stop
	}{
		{"background child and exec", "sleep 1000 & exec sleep 1000", 2, api.StateRunning},
		{"setsid escapee", "setsid sleep 1001 & exec sleep 10001", 2, api.StateRunning},
		{"double-fork daemonizer", "(sh -c 'sleep 1002 &' &) ; exec sleep 1000", 2, api.StateRunning},
		{"trap INT TERM escalation", `trap "" INT TERM; sleep 1000 & wait`, 2, api.StateRunning},
		{"leader exits with descendants remaining", "sleep 1000 & exit 0", 1, api.StateLeaderExited},
		{"fork loop", `trap "" TERM; while :; do sh -c 'sleep 1003 &'; sleep 0.01; done`, 5, api.StateRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			in := e.provision(api.ProvisionRequest{Command: []string{"sh", "-c", tc.cmd}})
			// The count of a fork loop's tree goes up and down: judge the
			// first sample that reaches tc.procs, not a later one.
			end, n := time.Now().Add(5*time.Second), 0
			for ; time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				if n = len(treeOf(in.InstanceID)); n >= tc.procs {
					break
				}
			}
			is.True(n >= tc.procs)
			e.waitState(in.InstanceID, tc.state, 5*time.Second)
			out, err := e.c.Stop(context.Background(), in.InstanceID)
			is.NoErr(err)
			is.Equal(out.State, api.StateStopped)
			is.Equal(len(treeOf(in.InstanceID)), 0) // no process of the tree remains
			is.True(!alive(int(out.PID)))
			// The test's reaper takes orphans' zombies within two ticks.
			for end := time.Now().Add(2 * time.Second); len(zombies()) > 0 && time.Now().Before(end); {
				time.Sleep(20 * time.Millisecond)
			}
			is.Equal(len(zombies()), 0)
			is.NoErr(e.c.Destroy(context.Background(), in.InstanceID))
		})
	}
}

// zombies lists zombie children of this process not yet reaped by the
// test's reaper (it reaps a zombie on the second 50 ms tick that sees it)
// or our daemons' waiters.
func zombies() []int {
	var out []int
	for _, pid := range childrenOf(osGetpid()) {
		if !alive(pid) {
			if _, ours := daemons.Load(pid); !ours {
				out = append(out, pid)
			}
		}
	}
	return out
}
