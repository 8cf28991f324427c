//go:build linux

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// TestKill9SupervisordReadoptsInstances guards against a restart that
// loses instances: after kill -9 and a new start, status, logs, attach,
// stop and destroy all work and nothing is orphaned.
func TestKill9SupervisordReadoptsInstances(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{PTY: true, Command: []string{"sh", "-c", "while :; do echo tick; sleep 0.1; done"}})
	e.waitLog(in.InstanceID, "tick", 5*time.Second)
	e.kill()
	e.boot()
	st := e.waitState(in.InstanceID, api.StateRunning, 5*time.Second)
	is.Equal(st.PID, in.PID)
	e.waitLog(in.InstanceID, "tick", 5*time.Second)
	s, _, err := e.c.Attach(context.Background(), &api.AttachRequest{InstanceID: in.InstanceID})
	is.NoErr(err)
	f, err := s.Recv()
	is.NoErr(err)
	is.Equal(f.T, wire.StreamData)
	s.Send(&wire.StreamFrame{T: wire.StreamDetach})
	s.Close()
	out, err := e.c.Stop(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.Equal(out.State, api.StateStopped)
	is.Equal(len(treeOf(in.InstanceID)), 0)
	is.NoErr(e.c.Destroy(context.Background(), in.InstanceID))
}

// TestPIDReuseIsNotSignalled guards against a restarted manager signalling
// a recycled pid: the instance's holder and agent die while supervisord is
// down, the recorded pid names an unrelated process; after restart that
// process is untouched and the instance is exited(unknown).
func TestPIDReuseIsNotSignalled(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}})
	e.kill()
	st := store.Store{Root: e.root + "/state/supervisord/instances"}
	md, err := st.Load(in.InstanceID)
	is.NoErr(err)
	is.NoErr(syscallKill(md.Holder.PID))
	is.NoErr(syscallKill(md.Agent.PID))
	for i := 0; i < 200 && (alive(md.Holder.PID) || alive(md.Agent.PID)); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	// An unrelated process takes the pid (simulated: the record is
	// pointed at it, keeping the old start time). A real reuse comes only
	// after the pid space wraps, long after the agent started; start times
	// are in clock ticks (10 ms), so make sure they differ, as a reused
	// pid's always would.
	time.Sleep(50 * time.Millisecond)
	other := exec.Command("sleep", "1000")
	is.NoErr(other.Start())
	defer func() { other.Process.Kill(); other.Wait() }()
	var hr store.HolderRecord
	is.NoErr(st.ReadJSON(in.InstanceID, store.FileHolder, &hr))
	hr.Agent.PID = other.Process.Pid
	md.Agent.PID = other.Process.Pid
	md.PGID = other.Process.Pid
	is.NoErr(store.WriteJSON(st.Path(in.InstanceID, store.FileHolder), hr))
	is.NoErr(st.Save(md))
	e.boot()
	s, err := e.c.Status(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.Equal(s.State, api.StateExited)
	is.True(s.Exit != nil && s.Exit.Unknown)
	_, err = e.c.Stop(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.NoErr(e.c.Destroy(context.Background(), in.InstanceID))
	is.True(alive(other.Process.Pid)) // untouched
}

// TestCrashBetweenSpawnAndMetadata guards the intent record: a holder
// running while metadata.json still says created is adopted on restart.
func TestCrashBetweenSpawnAndMetadata(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{Command: []string{"sleep", "1000"}})
	e.kill()
	st := store.Store{Root: e.root + "/state/supervisord/instances"}
	md, err := st.Load(in.InstanceID)
	is.NoErr(err)
	md.State, md.PGID = api.StateCreated, 0
	md.Agent.PID = 0
	is.NoErr(st.Save(md))
	e.boot()
	s := e.waitState(in.InstanceID, api.StateRunning, 5*time.Second)
	is.Equal(s.PID, in.PID)
	b, _ := os.ReadFile(st.Path(in.InstanceID, store.FileMetadata))
	var raw map[string]any
	is.NoErr(json.Unmarshal(b, &raw))
	is.Equal(raw["schema_version"], float64(store.SchemaVersion))
	is.True(strings.Contains(string(b), `"state": "running"`))
	is.NoErr(e.c.Destroy(context.Background(), in.InstanceID))
	is.Equal(len(treeOf(in.InstanceID)), 0)
}
