package provider

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/matryer/is"
)

// RemoveLeftover removes a state directory runc cannot read (no
// state.json: runc's own `delete --force` removes it) and an empty
// cgroup of that path, and the list reads stored state again; it leaves
// a container runc reads (created, or stopped with its init gone) as it
// is, and refuses a bad id or cgroups path before anything runs.
func TestRemoveLeftover(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	ctx := context.Background()
	e := newEnv(t, Runc)
	cli := e.p.(*cli)
	_, err := e.p.Negotiate(ctx)
	is.NoErr(err)

	// Allowed: a directory with exec.fifo only, and its cpuset cgroup.
	cgPath := "/" + filepath.Base(e.dir) + "-left"
	is.NoErr(os.MkdirAll(cli.root, 0o700))
	is.NoErr(os.Mkdir(filepath.Join(cli.root, "left"), 0o711))
	is.NoErr(syscall.Mkfifo(filepath.Join(cli.root, "left", "exec.fifo"), 0o622))
	var cgDirs []string
	for _, m := range cli.mounts {
		d := filepath.Join(m.Point, cgPath)
		if os.Mkdir(d, 0o755) == nil {
			cgDirs = append(cgDirs, d)
			t.Cleanup(func() { os.Remove(d) })
			break // one hierarchy, as runc leaves it
		}
	}
	is.Equal(len(cgDirs), 1)
	_, ok := cli.storedList(cli.codec)
	is.True(!ok) // the leftover forces the fallback to `runc list`
	removed, err := cli.RemoveLeftover(ctx, "left", cgPath)
	is.NoErr(err)
	is.True(removed)
	_, err = os.Lstat(filepath.Join(cli.root, "left"))
	is.True(os.IsNotExist(err))
	_, err = os.Lstat(cgDirs[0])
	is.True(os.IsNotExist(err))
	_, ok = cli.storedList(cli.codec)
	is.True(ok) // stored reads again

	// Refused: real containers, created and stopped.
	e.create(t, "made", nil)
	e.create(t, "ended", nil, "true")
	is.NoErr(e.p.Start(ctx, "ended"))
	waitStatus(t, e.p, "ended", StatusStopped)
	for _, id := range []string{"made", "ended"} {
		removed, err := cli.RemoveLeftover(ctx, id, "/"+filepath.Base(e.dir)+"-"+id)
		is.NoErr(err)
		is.True(!removed)
		_, err = e.p.State(ctx, id)
		is.NoErr(err) // untouched
	}
	_, err = cli.RemoveLeftover(ctx, "../x", cgPath)
	wantCode(t, err, CodeInvalidID)
	for _, p := range []string{"/", "rel", "/a/../b"} {
		_, err = cli.RemoveLeftover(ctx, "left", p)
		wantCode(t, err, CodeInvalidArgument)
	}
}
