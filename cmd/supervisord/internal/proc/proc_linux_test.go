package proc

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/matryer/is"
)

// Not parallel: it counts the test process's descendants.
//
// A child and its grandchild are descendants while they run; once the
// child is a zombie it is neither a descendant nor alive, and Identify
// still names it until it is reaped.
func TestDescendantsAndAlive(t *testing.T) {
	is := is.New(t)
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & read x; kill $!")
	in, err := cmd.StdinPipe()
	is.NoErr(err)
	is.NoErr(cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sh := cmd.Process.Pid
	id, err := Identify(sh)
	is.NoErr(err)
	is.True(Alive(id))
	is.True(!Alive(Identity{PID: sh, StartTime: id.StartTime + 1, BootID: id.BootID})) // another process
	is.True(!Alive(Identity{PID: sh, StartTime: id.StartTime, BootID: "another boot"}))

	var kids []int
	for end := time.Now().Add(30 * time.Second); len(kids) < 2 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		kids = Descendants(os.Getpid())
	}
	is.True(slices.Contains(kids, sh))
	is.Equal(len(Descendants(sh)), 1) // the sleep

	is.NoErr(in.Close()) // the shell kills the sleep and exits, unreaped
	for end := time.Now().Add(30 * time.Second); Alive(id) && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
	}
	is.True(!Alive(id))
	is.True(!slices.Contains(Descendants(os.Getpid()), sh))
	again, err := Identify(sh)
	is.NoErr(err)
	is.Equal(again, id)
	_ = cmd.Wait()
	_, err = Identify(sh)
	is.Equal(err, ErrGone)
}
