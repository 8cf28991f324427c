package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/rpc"
)

// TestSignalContextStops sends signals to a child blocked on
// SignalContext's (or DaemonSignalContext's) context: SIGTERM and SIGINT
// make it return and exit cleanly under both; SIGHUP ends a SignalContext
// child (a command whose terminal went away) by its default action, which
// systemd counts as a clean stop, and is caught by DaemonSignalContext,
// whose child a later SIGTERM still stops cleanly.
func TestSignalContextStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		daemon     bool
		sigs       []syscall.Signal
		wantKilled bool // by the first signal's default action
	}{
		{"SIGTERM", false, []syscall.Signal{syscall.SIGTERM}, false},
		{"SIGINT", false, []syscall.Signal{syscall.SIGINT}, false},
		{"SIGHUP", false, []syscall.Signal{syscall.SIGHUP}, true},
		{"daemon SIGTERM", true, []syscall.Signal{syscall.SIGTERM}, false},
		// Pending signals are delivered lowest number first, so a SIGHUP
		// that could kill the child would do so before SIGTERM is handled.
		{"daemon SIGHUP, then SIGTERM", true, []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM}, false},
	}
	// A SIGHUP that this process ignores (started under nohup) is ignored
	// by the child too: Go keeps a signal ignored at start ignored unless
	// it is caught, so then it cannot kill a SignalContext child.
	hupIgnored := ignored(t, syscall.SIGHUP)
	for _, tt := range tests {
		if tt.wantKilled && hupIgnored {
			tt.wantKilled = false
			tt.sigs = append(tt.sigs, syscall.SIGTERM) // it lives on; SIGTERM still stops it
		}
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			env := childDaemon + "=0"
			if tt.daemon {
				env = childDaemon + "=1"
			}
			cmd := child("signals", env)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			is.NoErr(err)
			is.NoErr(cmd.Start())
			r := bufio.NewReader(out)
			is.Equal(readLine(t, r), "ready")
			for _, sig := range tt.sigs {
				is.NoErr(cmd.Process.Signal(sig))
			}
			if tt.wantKilled {
				err := waitExit(t, cmd, 10*time.Second)
				is.True(err != nil)
				ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
				is.True(ws.Signaled())
				is.Equal(ws.Signal(), tt.sigs[0]) // the default action
				return
			}
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

// TestServiceRunSIGHUP sends two SIGHUPs to a child serving a Service
// under DaemonSignalContext, without a Reload hook, with one that
// succeeds and with one that fails: each SIGHUP is logged once as
// daemon.sighup with what Reload did, the same process goes on answering
// health, and SIGTERM still stops it cleanly.
func TestServiceRunSIGHUP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, reload string
		wantReload   string // the reload field of each daemon.sighup line
		wantLevel    string
		wantStdout   string // before "stopped"
	}{
		{"no hook", "", ReloadNone, "INFO", ""},
		{"hook succeeds", "ok", ReloadDone, "INFO", "reloaded\nreloaded\n"},
		{"hook fails", "fail", ReloadFailed, "WARN", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			root := filepath.Join(tmpRoot(t), "r")
			cmd := child("serve", childRootEnv+"="+root, childReload+"="+tt.reload)
			var stdout, stderr syncBuffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			is.NoErr(cmd.Start())
			exited := false
			defer func() {
				if !exited {
					cmd.Process.Kill()
					cmd.Wait()
				}
			}()
			c := rpc.NewClient(filepath.Join(root, "run", NameSecretd, "api.sock"), 5*time.Second)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			waitFor(t, ctx, &stderr, func() bool { return len(linesWithMsg(stderr.String(), "daemon.ready")) == 1 })
			h, err := healthapi.Get(ctx, c)
			is.NoErr(err)
			for n := 1; n <= 2; n++ {
				is.NoErr(cmd.Process.Signal(syscall.SIGHUP))
				// One line per signal: wait for this one before the next,
				// so that two pending SIGHUPs do not merge into one.
				waitFor(t, ctx, &stderr, func() bool { return len(linesWithMsg(stderr.String(), "daemon.sighup")) == n })
				again, err := healthapi.Get(ctx, c)
				is.NoErr(err)
				is.Equal(again.Epoch, h.Epoch) // the same process, still serving
			}
			for _, l := range linesWithMsg(stderr.String(), "daemon.sighup") {
				is.Equal(l["reload"], tt.wantReload)
				is.Equal(l["level"], tt.wantLevel)
				if tt.reload == "fail" {
					is.True(strings.Contains(fmt.Sprint(l["err"]), childReloadErr)) // why it failed
				}
			}
			is.NoErr(cmd.Process.Signal(syscall.SIGTERM))
			err = waitExit(t, cmd, 15*time.Second)
			exited = true
			if err != nil {
				t.Fatalf("child exit: %v; stderr:\n%s", err, stderr.String())
			}
			is.Equal(stdout.String(), tt.wantStdout+"stopped\n") // Run returned nil
		})
	}
}

// linesWithMsg returns the JSON log lines of out whose msg is msg; a
// partial last line (a child still writing) is skipped.
func linesWithMsg(out, msg string) []map[string]any {
	var lines []map[string]any
	for _, line := range strings.Split(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			lines = append(lines, m)
		}
	}
	return lines
}

// waitFor polls cond until it holds, failing the test with out when ctx
// ends first.
func waitFor(t *testing.T, ctx context.Context, out fmt.Stringer, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting; output:\n%s", out)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ignored reports whether this process ignores sig (SigIgn in
// /proc/self/status, proc(5)).
func ignored(t *testing.T, sig syscall.Signal) bool {
	t.Helper()
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return mask&(1<<(uint(sig)-1)) != 0
		}
	}
	t.Fatal("no SigIgn in /proc/self/status")
	return false
}
