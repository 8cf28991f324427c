//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"

	"hostkit.dev/cmd/supervisord/internal/container"
	"hostkit.dev/cmd/supervisord/internal/fault"
)

// TestCrashAtEveryStepContainer kills supervisord at every step boundary
// of a runtime container provision, stop and destroy (through the
// containerization-helper), restarts it and checks: no orphan directory,
// no container in the helper's runtime that no live instance owns, no
// process of an instance that is gone or ended; a provision whose
// container was started is finished (a pending start is replayed), one
// that was not is undone (the container deleted, the directory removed,
// the id free again); a stop or destroy is finished.
func TestCrashAtEveryStepContainer(t *testing.T) {
	e := start(t)
	fixtures(t)
	startHelper(t, e, "-allow-exe", binary, "-allow-exe", buildFaultBinary(t))
	marks := t.TempDir()
	ctx := context.Background()
	var ids []string // every instance this test made
	for _, tc := range []struct {
		op, point, want string // want: gone, running or stopped
	}{
		{"provision", fault.ProvisionIntent, "gone"},
		{"provision", fault.ContainerPending + "#1", "gone"}, // create pending: replayed, then undone
		{"provision", fault.ContainerDone + "#1", "gone"},    // created, not started: undone
		{"provision", fault.ContainerPending + "#2", "running"},
		{"provision", fault.ContainerDone + "#2", "running"},
		{"provision", fault.ProvisionRunning, "running"},
		{"stop", fault.StopIntent, "stopped"},
		{"stop", fault.ContainerPending, "stopped"},
		{"stop", fault.ContainerDone, "stopped"},
		{"stop", fault.StopStopped, "stopped"},
		{"destroy", fault.DestroyIntent, "gone"},
		{"destroy", fault.ContainerPending, "gone"},
		{"destroy", fault.ContainerDone, "gone"},
		{"destroy", fault.DestroyReleased, "gone"},
		{"destroy", fault.DestroyTrashed, "gone"},
	} {
		t.Run(tc.op+"@"+tc.point, func(t *testing.T) {
			is := is.New(t)
			req := ctrReq("/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done") // ends at the stop's SIGTERM
			req.InstanceID = api.NewID()
			id := req.InstanceID
			ids = append(ids, id)
			crashAt(t, e, marks, tc.op, tc.point, tc.want, ptr(req))
			containerClean(t, e, ids)
			if tc.want == "gone" && tc.op == "provision" {
				_, err := e.c.Provision(ctx, ptr(req)) // the id is free again
				is.NoErr(err)
			}
			e.destroyAll()
			containerClean(t, e, ids)
		})
	}
}

// containerClean checks (waiting up to 20 s) that every directory under
// the instance root is a listed instance, every container in the
// helper's runtime belongs to a running instance, and no process of the
// instances ids is left unless its instance runs.
func containerClean(t *testing.T, e *env, ids []string) {
	t.Helper()
	var bad []string
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		bad = nil
		l, err := e.c.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		inst := map[string]api.Instance{}
		owned := map[string]bool{}
		for _, in := range l.Instances {
			inst[in.InstanceID] = in
			if in.State == api.StateRunning {
				owned[in.ContainerID] = true
			}
		}
		ents, _ := os.ReadDir(filepath.Join(e.root, "state", "supervisord", "instances"))
		for _, en := range ents {
			if _, ok := inst[en.Name()]; !ok {
				bad = append(bad, "orphan directory "+en.Name())
			}
		}
		for _, c := range runcList(t, e.root) {
			if !owned[c] {
				bad = append(bad, "orphan container "+c)
			}
		}
		for _, id := range ids {
			if n := len(treeOf(id)); n > 0 && inst[id].State != api.StateRunning {
				bad = append(bad, fmt.Sprintf("%d orphan processes of %s (%q)", n, id, inst[id].State))
			}
			if in, ok := inst[id]; ok && in.State == api.StateRunning {
				rec, err := container.LoadRecord(filepath.Join(e.root, "state", "supervisord", "instances", id))
				if err != nil || !rec.Started() || rec.Pending != nil || !slices.Contains(runcList(t, e.root), rec.ContainerID) {
					bad = append(bad, "running instance without its started container: "+id)
				}
			}
		}
		if len(bad) == 0 {
			return
		}
	}
	t.Fatalf("after restart:\n%s\nsupervisord: %s", strings.Join(bad, "\n"), e.cmd.Stderr)
}
