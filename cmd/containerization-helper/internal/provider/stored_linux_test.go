package provider

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// The state read from runc's own records is the state `runc state` and
// `runc list` print, in every status, and a case the records do not settle
// (a paused container, a directory that is not a container) is answered by
// the runtime.
func TestStoredStateMatchesRuntime(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	e := newEnv(t, Runc)
	p := e.p.(*cli)
	c, err := p.negotiated(ctx)
	is.NoErr(err)
	e.create(t, "created", ann("created"))
	e.create(t, "running", ann("running"))
	is.NoErr(p.Start(ctx, "running"))
	e.create(t, "stopped", nil, "true")
	is.NoErr(p.Start(ctx, "stopped"))
	waitStatus(t, p, "stopped", StatusStopped)
	e.create(t, "paused", ann("paused"))
	is.NoErr(p.Start(ctx, "paused"))
	runc(t, p, "pause", "paused")
	t.Cleanup(func() { runc(t, p, "resume", "paused") })

	for _, tt := range []struct {
		id     string
		status Status
	}{{"created", StatusCreated}, {"running", StatusRunning}, {"stopped", StatusStopped}, {"paused", StatusPaused}} {
		t.Run(tt.id, func(t *testing.T) {
			is := is.New(t)
			fast, ok := p.storedState(c, tt.id)
			is.True(ok)
			slow, err := p.execState(ctx, c, tt.id)
			is.NoErr(err)
			is.Equal(fast.Status, tt.status)
			is.Equal(fast.ID, slow.ID)
			is.Equal(fast.Status, slow.Status)
			is.Equal(fast.Pid, slow.Pid)
			is.Equal(fast.Bundle, slow.Bundle)
			is.True(fast.Created.Equal(slow.Created))
			is.Equal(fast.Annotations, slow.Annotations)
		})
	}

	fast, ok := p.storedList(c)
	is.True(ok)
	before := e.procexecRuns()
	list, err := p.List(ctx) // from the records: no runtime process
	is.NoErr(err)
	is.Equal(e.procexecRuns(), before)
	is.Equal(len(list), 4)
	res, _, err := p.run(ctx, verbList, nil, []string{"--format", "json"})
	is.NoErr(err)
	slow, err := c.List(res.Stdout)
	is.NoErr(err)
	is.Equal(len(fast), len(slow))
	for i := range fast {
		is.Equal(fast[i].ID, slow[i].ID)
		is.Equal(string(fast[i].Status), slow[i].Status)
		is.Equal(fast[i].Pid, slow[i].Pid)
		is.Equal(fast[i].Annotations, slow[i].Annotations)
	}

	// A directory that is no container of runc's: the records do not
	// settle the list, so the runtime is asked (and skips it).
	is.NoErr(os.Mkdir(filepath.Join(p.root, "Not-An-Id"), 0o700))
	_, ok = p.storedList(c)
	is.True(!ok)
	before = e.procexecRuns()
	list, err = p.List(ctx)
	is.NoErr(err)
	is.Equal(e.procexecRuns(), before+1)
	is.Equal(len(list), 4)
	is.NoErr(os.Remove(filepath.Join(p.root, "Not-An-Id")))
}

// runc 1.1's delete of a created container, or forced delete of a running
// one, goes through kill and a plain delete (no 100 ms sleep inside runc),
// and still leaves nothing behind.
func TestDeleteKillsFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, Runc)
	p := e.p.(*cli)
	e.create(t, "created", ann("created"))
	e.create(t, "running", ann("running"))
	if err := p.Start(ctx, "running"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"created", "running"} {
		t.Run(id, func(t *testing.T) {
			is := is.New(t)
			st, err := p.State(ctx, id)
			is.NoErr(err)
			is.NoErr(p.Delete(ctx, id, id == "running"))
			_, err = p.State(ctx, id)
			wantCode(t, err, CodeNotFound)
			_, err = os.Stat("/proc/" + strconv.Itoa(st.Pid))
			is.True(os.IsNotExist(err)) // killed and reaped
		})
	}
	logs := e.logs.String()
	if strings.Contains(logs, `"--force"`) {
		t.Fatalf("a forced delete ran:\n%s", logs)
	}
}

// runc runs the provider's runtime with a verb outside its policy (pause,
// resume), for a test only.
func runc(t *testing.T, p *cli, verb, id string) {
	t.Helper()
	out, err := exec.Command(p.t.runtime, "--root", p.root, verb, id).CombinedOutput()
	if err != nil {
		t.Fatalf("runc %s %s: %v: %s", verb, id, err, out)
	}
}
