package server

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// A stop's SIGTERM goes through the init's pidfd: a live process gets it
// (and the wait sees its exit at once); one that has exited takes it as
// kill(2) does a zombie's (no effect), and once reaped the pidfd answers
// ESRCH, which signalInit takes as done. Neither asks the runtime (the
// zero Server here has none: a fallback would panic).
func TestSignalInitThroughPidfd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		exited   bool  // the process has exited before the signal
		reaped   bool  // and has been reaped
		wantSend error // what the pidfd's own signal returns then
	}{
		{name: "live init gets SIGTERM"},
		{name: "zombie init", exited: true},
		{name: "reaped init is no error", exited: true, reaped: true, wantSend: syscall.ESRCH},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			argv := []string{"/bin/sleep", "60"}
			if tt.exited {
				argv = []string{"/bin/true"}
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			is.NoErr(cmd.Start())
			w, err := openPidWaiter(cmd.Process.Pid)
			is.NoErr(err)
			defer w.close()
			if tt.exited {
				exited, err := w.wait(ctx, time.Now().Add(10*time.Second))
				is.NoErr(err)
				is.True(exited) // a zombie: readable, not yet reaped
				if tt.reaped {
					is.NoErr(cmd.Wait())
				}
				is.Equal(w.signal(syscall.SIGTERM), tt.wantSend)
			}
			is.NoErr((&Server{}).signalInit(ctx, "hk-0000000000000000", w, syscall.SIGTERM))
			exited, err := w.wait(ctx, time.Now().Add(10*time.Second))
			is.NoErr(err)
			is.True(exited)
			switch {
			case !tt.exited:
				var ee *exec.ExitError
				is.True(errors.As(cmd.Wait(), &ee))
				is.Equal(ee.Sys().(syscall.WaitStatus).Signal(), syscall.SIGTERM) // killed by the pidfd's SIGTERM
			case !tt.reaped:
				is.NoErr(cmd.Wait()) // /bin/true's own exit
			}
		})
	}
}
