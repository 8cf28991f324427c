package holder

import (
	"os/exec"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
)

// zombieExit reads the status of an exited, unreaped child, and nothing
// from a running one or one already reaped.
func TestZombieExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
		want   api.ExitStatus
	}{
		{"exit code", "exit 7", api.ExitStatus{Code: 7}},
		{"signal", "kill -KILL $$", api.ExitStatus{Signal: "SIGKILL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			cmd := exec.Command("/bin/sh", "-c", "read x; "+tc.script)
			in, err := cmd.StdinPipe()
			is.NoErr(err)
			is.NoErr(cmd.Start())
			pid := cmd.Process.Pid
			is.Equal(zombieExit(pid), nil) // running
			is.NoErr(in.Close())
			var got *api.ExitStatus
			for end := time.Now().Add(30 * time.Second); got == nil && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				got = zombieExit(pid)
			}
			is.True(got != nil)
			is.Equal(*got, tc.want)
			_ = cmd.Wait()
			is.Equal(zombieExit(pid), nil) // reaped
		})
	}
}
