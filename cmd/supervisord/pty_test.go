//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// readUntil reads stream frames until the collected data holds want.
func readUntil(t *testing.T, s *rpc.Stream, want string) string {
	t.Helper()
	s.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
	var got strings.Builder
	for !strings.Contains(got.String(), want) {
		f, err := s.Recv()
		if err != nil {
			t.Fatalf("want %q, have %q: %v", want, got.String(), err)
		}
		if f.T == wire.StreamData {
			got.Write(f.B)
		} else if f.Ends() {
			t.Fatalf("stream ended (%s %s) before %q; have %q", f.T, f.Code, want, got.String())
		}
	}
	return got.String()
}

// TestFinalLineIsNeverLost guards against losing the last output before
// exit: 200 short-lived PTY agents under CPU load.
func TestFinalLineIsNeverLost(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	load := e.provision(api.ProvisionRequest{Command: []string{"sh", "-c", "while :; do :; done & while :; do :; done"}})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var mu sync.Mutex
	lost := 0
	for i := 0; i < 200; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			in, err := e.c.Provision(context.Background(), &api.ProvisionRequest{PTY: true, Start: true, WorkingDir: "/tmp", Command: []string{"sh", "-c", `printf "%s\n" final-line`}})
			if err != nil {
				t.Error(err)
				return
			}
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
				if s, err := e.c.Status(context.Background(), in.InstanceID); err == nil && s.State == api.StateExited {
					break
				}
			}
			l, err := e.c.Logs(context.Background(), &api.LogsRequest{InstanceID: in.InstanceID})
			if err != nil || !strings.Contains(string(l.Data), "final-line") {
				mu.Lock()
				lost++
				mu.Unlock()
			}
			e.c.Destroy(context.Background(), in.InstanceID)
		}()
	}
	wg.Wait()
	is.Equal(lost, 0)
	is.NoErr(e.c.Destroy(context.Background(), load.InstanceID))
}

// TestAttachReplaysAndFansOut guards against output lost while detached
// and attachers that see different output; resize is visible to stty.
func TestAttachReplaysAndFansOut(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{PTY: true, Command: []string{"sh", "-c", "echo while-detached; read x; echo got-$x; read y; stty size; sleep 1000"}})
	e.waitLog(in.InstanceID, "while-detached", 5*time.Second)
	a, _, err := e.c.Attach(context.Background(), &api.AttachRequest{InstanceID: in.InstanceID})
	is.NoErr(err)
	defer a.Close()
	b, _, err := e.c.Attach(context.Background(), &api.AttachRequest{InstanceID: in.InstanceID})
	is.NoErr(err)
	defer b.Close()
	readUntil(t, a, "while-detached")
	readUntil(t, b, "while-detached")
	is.NoErr(a.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("hello\r")}))
	readUntil(t, a, "got-hello")
	readUntil(t, b, "got-hello")
	is.NoErr(api.Resize(a, 37, 101))
	time.Sleep(50 * time.Millisecond)
	is.NoErr(a.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("\r")}))
	readUntil(t, b, "37 101")
}

// TestResizeAfterExitIsAnError guards against a resize after exit that
// hangs: the stream answers with an error or ends, and a new attach is
// instance.exited.
func TestResizeAfterExitIsAnError(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{PTY: true, Command: []string{"sh", "-c", "read x; echo bye"}})
	s, _, err := e.c.Attach(context.Background(), &api.AttachRequest{InstanceID: in.InstanceID})
	is.NoErr(err)
	defer s.Close()
	is.NoErr(s.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("\r")}))
	s.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		f, err := s.Recv()
		is.NoErr(err)
		if f.T == wire.StreamExit {
			break
		}
	}
	_ = api.Resize(s, 10, 10) // after exit: an error or a closed stream, never a hang
	s.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := s.Recv()
	is.True(err != nil || f.T == wire.StreamError)
	e.waitState(in.InstanceID, api.StateExited, 5*time.Second)
	_, _, err = e.c.Attach(context.Background(), &api.AttachRequest{InstanceID: in.InstanceID})
	code(t, err, api.CodeInstanceExited)
}

// TestStalledClientBlocksNothing guards against a stalled attached client
// that wedges status or destroy.
func TestStalledClientBlocksNothing(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{PTY: true, Command: []string{"sh", "-c", "while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done"}})
	s, _, err := e.c.Attach(context.Background(), &api.AttachRequest{InstanceID: in.InstanceID})
	is.NoErr(err)
	defer s.Close() // never read
	time.Sleep(500 * time.Millisecond)
	t0 := time.Now()
	st, err := e.c.Status(context.Background(), in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateRunning)
	is.True(time.Since(t0) < 2*time.Second)
	t0 = time.Now()
	is.NoErr(e.c.Destroy(context.Background(), in.InstanceID))
	is.True(time.Since(t0) < 10*time.Second)
}

// TestNoLeakAcrossAttachCycles guards against a reader goroutine (and its
// connection) leaked per detach: 100 attach/detach cycles leave the
// daemon's and the holder's open descriptors where they were.
func TestNoLeakAcrossAttachCycles(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{PTY: true, Command: []string{"sh", "-c", "while :; do echo tick; sleep 0.05; done"}})
	cycle := func() {
		s, _, err := e.c.Attach(context.Background(), &api.AttachRequest{InstanceID: in.InstanceID})
		is.NoErr(err)
		readUntil(t, s, "tick")
		s.Send(&wire.StreamFrame{T: wire.StreamDetach})
		s.Close()
	}
	cycle()
	time.Sleep(200 * time.Millisecond)
	holderPID := holderOf(t, e, in.InstanceID)
	d0, h0 := fds(e.cmd.Process.Pid), fds(holderPID)
	for i := 0; i < 100; i++ {
		cycle()
	}
	time.Sleep(500 * time.Millisecond)
	is.True(fds(e.cmd.Process.Pid) <= d0+2)
	is.True(fds(holderPID) <= h0+2)
}

func fds(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}
