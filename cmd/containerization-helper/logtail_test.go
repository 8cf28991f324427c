package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/helperapi"
)

// deleteForced plans a forced delete of id (stop timeout ms) and carries
// it out under key.
func (s *session) deleteForced(t *testing.T, id, key string, ms int64) (*helperapi.DeleteResponse, *helperapi.MutationRequest) {
	t.Helper()
	ctx := ctxT(t, 2*time.Minute)
	p, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: id, Context: s.cx, Force: true, StopTimeoutMS: ms})
	if err != nil {
		t.Fatalf("plan delete: %v", err)
	}
	req := &helperapi.MutationRequest{ContainerID: id, Context: s.cx, PlanHash: p.PlanHash}
	d, err := s.c.Delete(ctx, key, req)
	if err != nil {
		t.Fatalf("delete: %v\n%s", err, s.h.stderr.String())
	}
	return d, req
}

// A forced delete's answer carries the console log read after the
// container stopped: what the init printed while it handled SIGTERM is in
// it, though the log itself is gone with the container. A replay in the
// same helper process gets the same answer; the answer kept in the state
// store for a replay after a helper restart has no tail (HasLogTail
// false), so the store stays small.
func TestDeleteCarriesLogTail(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	img := fixture(t)
	root := newRoot(t)
	h := startHelper(t, "", root, "-allow-exe", selfExe(t))
	s := newSession(t, h)
	cmd := []string{"/bin/sh", "-c", "trap 'echo bye-marker; exit 0' TERM; echo up; sleep 600 & wait"}
	c := s.create(t, img, cmd, []string{"PATH=/bin"}, true)
	waitLog(t, s, c.ContainerID, "up")

	key := newIdem(t)
	d, req := s.deleteForced(t, c.ContainerID, key, 30_000)
	is.True(d.Deleted)
	is.True(d.HasLogTail)
	is.True(!d.LogTruncated)
	is.Equal(string(d.LogTail), "up\nbye-marker\n") // written during the SIGTERM grace
	_, err := os.Stat(filepath.Join(root, "state", "helper", "logs", c.ContainerID+".log"))
	is.True(os.IsNotExist(err)) // the console log went with the container

	again, err := s.c.Delete(ctxT(t, time.Minute), key, req) // replay, same process
	is.NoErr(err)
	is.Equal(*again, *d)

	h.stop(t)
	h2 := startHelper(t, "", root, "-allow-exe", selfExe(t))
	c2 := h2.client(t)
	replay, err := c2.Delete(ctxT(t, time.Minute), key, req) // replay from the state store
	is.NoErr(err)
	is.Equal(*replay, helperapi.DeleteResponse{ContainerID: c.ContainerID, Deleted: true}) // no tail kept
	// state.json and its write-ahead slots
	var stored int64
	ents, err := os.ReadDir(filepath.Join(root, "state", "helper", "store"))
	is.NoErr(err)
	for _, e := range ents {
		fi, err := e.Info()
		is.NoErr(err)
		stored += fi.Size()
	}
	t.Logf("state store: %d bytes", stored)
	is.True(stored > 0 && stored < 64<<10)
}

// A console log longer than helperapi.MaxLogBytes gives its last MiB,
// marked truncated; a container deleted without having written anything
// gives an empty tail that is still a tail (HasLogTail); a log swapped
// for a symlink is not followed (no tail, the delete still happens).
func TestDeleteLogTailBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h, s, img := helperSession(t)
	// 1300 lines of 1025 bytes (1.27 MiB), then the markers.
	big := `s=x; for i in 1 2 3 4 5 6 7 8 9 10; do s=$s$s; done; i=0; while [ $i -lt 1300 ]; do echo $s; i=$((i+1)); done; ` +
		`trap 'echo bye-marker; exit 0' TERM; echo up; sleep 600 & wait`
	c := s.create(t, img, []string{"/bin/sh", "-c", big}, []string{"PATH=/bin"}, true)
	waitLog(t, s, c.ContainerID, "up")
	d, _ := s.deleteForced(t, c.ContainerID, newIdem(t), 30_000)
	is.True(d.HasLogTail)
	is.True(d.LogTruncated)
	is.Equal(len(d.LogTail), helperapi.MaxLogBytes)
	is.True(strings.HasSuffix(string(d.LogTail), strings.Repeat("x", 1024)+"\nup\nbye-marker\n"))

	quiet := s.create(t, img, []string{"/bin/sleep", "600"}, []string{"PATH=/bin"}, false) // created, never started
	d, _ = s.deleteForced(t, quiet.ContainerID, newIdem(t), 1000)
	is.True(d.Deleted)
	is.True(d.HasLogTail)
	is.Equal(len(d.LogTail), 0)
	is.True(!d.LogTruncated)

	// A console log swapped for a symlink is never followed: the delete
	// happens, its answer has no tail, and the target is not read.
	secret := filepath.Join(t.TempDir(), "secret")
	is.NoErr(os.WriteFile(secret, []byte("not-for-the-answer"), 0o600))
	swapped := s.create(t, img, []string{"/bin/sleep", "600"}, []string{"PATH=/bin"}, false)
	log := filepath.Join(h.root, "state", "helper", "logs", swapped.ContainerID+".log")
	is.NoErr(os.Remove(log))
	is.NoErr(os.Symlink(secret, log))
	d, _ = s.deleteForced(t, swapped.ContainerID, newIdem(t), 1000)
	is.True(d.Deleted)
	is.True(!d.HasLogTail)
	is.Equal(len(d.LogTail), 0)
	is.True(hasLine(h.stderr.String(), "helper.delete_log_unread"))
}
