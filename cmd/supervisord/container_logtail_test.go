//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"

	"hostkit.dev/cmd/supervisord/internal/container"
)

// TestContainerStopKeepsGraceOutput: stop deletes the container through
// the helper, whose answer carries the console log read after the
// container stopped, so what the container printed while it handled
// SIGTERM is in output.log (and in logs) once it is stopped, though the
// helper removed the console log with the container.
func TestContainerStopKeepsGraceOutput(t *testing.T) {
	is := is.New(t)
	e := start(t)
	startHelper(t, e)
	ctx := context.Background()
	req := ctrReq("/bin/sh", "-c", "trap 'echo bye-marker; exit 0' TERM; echo up; sleep 600 & wait")
	req.StopTimeoutMS = 30_000
	in, err := e.c.Provision(ctx, &req)
	is.NoErr(err)
	is.Equal(in.State, api.StateRunning)
	e.waitLog(in.InstanceID, "up", 5*time.Second)

	t0 := time.Now()
	out, err := e.c.Stop(ctx, in.InstanceID)
	is.NoErr(err)
	t.Logf("stop (init exits on SIGTERM): %v", time.Since(t0))
	is.True(time.Since(t0) < 15*time.Second) // the init's exit ended the grace, not the 30 s timeout
	is.Equal(out.State, api.StateStopped)
	is.Equal(len(runcList(t, e.root)), 0)

	dir := filepath.Join(e.root, "state", "supervisord", "instances", in.InstanceID)
	b, err := os.ReadFile(filepath.Join(dir, container.FileLog))
	is.NoErr(err)
	is.Equal(string(b), "up\nbye-marker\n")
	fi, err := os.Stat(filepath.Join(dir, container.FileLog))
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
	rec, err := container.LoadRecord(dir)
	is.NoErr(err)
	is.True(rec.Deleted() && rec.LogSaved)
	is.True(strings.Contains(e.waitLog(in.InstanceID, "bye-marker", time.Second), "up\n")) // logs reads the copy
}
