package daemon

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestSignalContextStops sends each stop signal to a child blocked on
// SignalContext's context and checks that it returns and exits cleanly.
func TestSignalContextStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sig  syscall.Signal
	}{
		{"SIGTERM", syscall.SIGTERM},
		{"SIGINT", syscall.SIGINT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			cmd := child("signals")
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			is.NoErr(err)
			is.NoErr(cmd.Start())
			r := bufio.NewReader(out)
			is.Equal(readLine(t, r), "ready")
			is.NoErr(cmd.Process.Signal(tt.sig))
			is.Equal(readLine(t, r), "stopped context canceled")
			is.NoErr(waitExit(t, cmd, 10*time.Second)) // exit status 0
		})
	}
}

// TestSignalContextIgnoresSIGPIPE has a child write to its stdout after
// the parent closed the pipe's read end. With SignalContext the write fails
// with EPIPE and the child lives on; without it (the control case) the Go
// runtime lets SIGPIPE kill the child.
func TestSignalContextIgnoresSIGPIPE(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		ignore     bool
		wantKilled bool
	}{
		{"with SignalContext", true, false},
		{"without SignalContext", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			pr, pw, err := os.Pipe()
			is.NoErr(err)
			env := []string{childIgnore + "=0"}
			if tt.ignore {
				env[0] = childIgnore + "=1"
			}
			cmd := child("sigpipe", env...)
			var stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = pw, &stderr
			in, err := cmd.StdinPipe()
			is.NoErr(err)
			is.NoErr(cmd.Start())
			pw.Close()
			pr.Close() // no reader left: the child's write gets EPIPE / SIGPIPE
			_, err = in.Write([]byte("go\n"))
			is.NoErr(err)
			in.Close()
			err = waitExit(t, cmd, 10*time.Second)
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if tt.wantKilled {
				is.True(err != nil)
				is.True(ws.Signaled())
				is.Equal(ws.Signal(), syscall.SIGPIPE)
				return
			}
			is.NoErr(err) // survived, exit status 0
			is.Equal(strings.TrimSpace(stderr.String()), "write: EPIPE")
		})
	}
}

// TestSignalContextParentCancel installs signal handlers in the test
// process, so it does not run in parallel.
func TestSignalContextParentCancel(t *testing.T) {
	is := is.New(t)
	parent, cancel := context.WithCancel(context.Background())
	ctx, stop := SignalContext(parent)
	defer stop()
	is.NoErr(ctx.Err())
	cancel()
	<-ctx.Done()
	is.Equal(ctx.Err(), context.Canceled)
}
