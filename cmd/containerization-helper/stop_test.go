package main

import (
	"strings"
	"testing"
	"time"

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

	cmd := []string{"/bin/sh", "-c", "trap 'echo got-term; exit 0' TERM; echo up; sleep 600 & wait"}
	c := s.create(t, img, cmd, []string{"PATH=/bin"}, true)
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
