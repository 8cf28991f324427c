//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// flood is an agent that writes output as fast as its PTY takes it.
var flood = []string{"sh", "-c", "exec yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"}

// attachHop opens an attach stream to instance id at one hop: through
// supervisord's relay, or straight at the holder's socket.
type attachHop struct {
	name string
	open func(e *env, id string) (*rpc.Stream, error)
}

var attachHops = []attachHop{
	{"through supervisord", func(e *env, id string) (*rpc.Stream, error) {
		st, _, err := e.c.Attach(context.Background(), &api.AttachRequest{InstanceID: id})
		return st, err
	}},
	{"at the holder", func(e *env, id string) (*rpc.Stream, error) {
		c := rpc.NewClient(filepath.Join(e.root, "run", "supervisord", "h", api.Hex16(id)+".sock"), 10*time.Second)
		defer c.Close()
		return c.OpenStream(context.Background(), holder.OpAttach, &holder.AttachRequest{}, &holder.Empty{})
	}},
}

// peerClosed waits (up to 60 s) until the other end of st's connection has
// shut its side (POLLRDHUP), without reading a byte: a structural "the
// server gave up on this client", no timing involved.
func peerClosed(t *testing.T, st *rpc.Stream) {
	t.Helper()
	raw, err := st.Conn().(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var revents int16
	var perr error
	err = raw.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		for end := time.Now().Add(60 * time.Second); time.Now().Before(end); {
			n, err := unix.Poll(pfd, 1000)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || n > 0 {
				perr, revents = err, pfd[0].Revents
				return
			}
		}
		perr = errors.New("the server kept a client that reads nothing for 60 s")
	})
	if err != nil || perr != nil {
		t.Fatal(err, perr)
	}
	if revents&unix.POLLRDHUP == 0 {
		t.Fatalf("poll: revents %#x", revents)
	}
}

// readToEnd reads every frame left on st: the data bytes, the frames that
// are not data (in order), and the error that ended the reading.
func readToEnd(st *rpc.Stream) (data int, others []*wire.StreamFrame, end error) {
	st.Conn().SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		f, err := st.Recv()
		if err != nil {
			return data, others, err
		}
		if f.T == wire.StreamData {
			data += len(f.B)
		} else {
			others = append(others, f)
		}
	}
}

// TestSlowAttachClientIsToldAndDropped guards against a client that cannot
// keep up being cut off mid-frame or silently: at each hop, a client that
// reads nothing while the agent floods its PTY gets whole data frames,
// then exactly one stream.slow_client error frame, then EOF. The agent
// runs on, and another attach works.
func TestSlowAttachClientIsToldAndDropped(t *testing.T) {
	for _, hop := range attachHops {
		t.Run(hop.name, func(t *testing.T) {
			is := is.New(t)
			e := start(t, "-host-runtime-enabled", "yes")
			in := e.provision(api.ProvisionRequest{PTY: true, Command: flood})
			slow, err := hop.open(e, in.InstanceID)
			is.NoErr(err)
			defer slow.Close()
			peerClosed(t, slow)                                       // never read until the server closed its side
			_, others, end := readToEnd(slow)                         // whole data frames (each decoded), then:
			is.Equal(len(others), 1)                                  // one frame that is not data
			is.Equal(others[0].T, wire.StreamError)                   // an error frame
			is.Equal(others[0].Code, api.CodeStreamSlow)              // stream.slow_client
			is.True(others[0].Msg != "")                              // with a message
			is.True(errors.Is(end, io.EOF))                           // then EOF at a frame boundary, not frame.truncated
			e.waitState(in.InstanceID, api.StateRunning, time.Second) // the agent runs on

			again, err := hop.open(e, in.InstanceID)
			is.NoErr(err)
			defer again.Close()
			readUntil(t, again, "0123456789abcdefghijklmnopqrstuvwxyz\r\n") // a new attach gets output
			// The agent still floods: on a loaded machine this client too
			// can fall behind before its detach goes out, and be dropped.
			if err := again.Send(&wire.StreamFrame{T: wire.StreamDetach}); err != nil {
				is.True(errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) // dropped, not broken
			}
		})
	}
}

// TestSlowRelayIsToldThroughTheRelay guards against the holder's
// stream.slow_client being lost on its way to the client: with
// supervisord stopped (SIGSTOP), its relay falls behind at the holder,
// which drops it with one whole error frame; once supervisord runs again
// the relay forwards that frame to its client (which kept up) in place of
// the output it still held, then the end.
func TestSlowRelayIsToldThroughTheRelay(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	in := e.provision(api.ProvisionRequest{PTY: true, Command: flood})
	st, _, err := e.c.Attach(context.Background(), &api.AttachRequest{InstanceID: in.InstanceID})
	is.NoErr(err)
	defer st.Close()
	readUntil(t, st, "xyz\r\n") // attached and flowing
	is.NoErr(e.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			e.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	holderErr := filepath.Join(e.root, "state", "supervisord", "instances", in.InstanceID, store.FileHolderErr)
	waitFile(t, holderErr, "holder.attach_dropped") // the holder dropped the stopped relay
	is.NoErr(e.cmd.Process.Signal(syscall.SIGCONT))
	stopped = false
	_, others, end := readToEnd(st)
	is.Equal(len(others), 1)                     // one frame that is not data
	is.Equal(others[0].T, wire.StreamError)      // an error frame
	is.Equal(others[0].Code, api.CodeStreamSlow) // the holder's stream.slow_client, forwarded
	is.True(errors.Is(end, io.EOF))              // then EOF, not frame.truncated
	is.Equal(e.waitState(in.InstanceID, api.StateRunning, time.Second).State, api.StateRunning)
}

// waitFile waits (up to 60 s) until the file at path holds want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), want) {
			return
		}
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s lacks %q: %s", path, want, b)
}

// TestAttachClientThatKeepsUpGetsEverything guards the other side: at each
// hop, a client that reads is never dropped and receives the agent's
// output byte for byte. The agent writes ~4.4 MB in two steps of ~2.2 MB,
// each after the client's input, so the backlog can never reach the
// bound however slow the machine, while each step is more than a send
// buffer holds.
func TestAttachClientThatKeepsUpGetsEverything(t *testing.T) {
	const steps, lines = 2, 300000 // 2 × ~2.2 MB of `seq`
	// "ready" once input is no longer echoed: input sent before that
	// would come back as output.
	script := fmt.Sprintf(`stty -echo; echo ready; i=0; while [ $i -lt %d ]; do read x; seq $((i*%d+1)) $((i*%d+%d)) | cat; i=$((i+1)); done`, steps, lines, lines, lines)
	for _, hop := range attachHops {
		t.Run(hop.name, func(t *testing.T) {
			is := is.New(t)
			e := start(t, "-host-runtime-enabled", "yes")
			in := e.provision(api.ProvisionRequest{PTY: true, Command: []string{"sh", "-c", script}})
			st, err := hop.open(e, in.InstanceID)
			is.NoErr(err)
			defer st.Close()
			readUntil(t, st, "ready\r\n") // nothing else comes before the first input
			var got strings.Builder
			for i := 1; i <= steps; i++ {
				is.NoErr(st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("\r")}))
				last := fmt.Sprintf("\r\n%d\r\n", i*lines)
				for !strings.HasSuffix(got.String(), last) {
					st.Conn().SetReadDeadline(time.Now().Add(30 * time.Second))
					f, err := st.Recv()
					is.NoErr(err)
					if f.T != wire.StreamData {
						t.Fatalf("step %d: frame %s %s %s after %d bytes", i, f.T, f.Code, f.Msg, got.Len())
					}
					got.Write(f.B)
				}
			}
			var want []byte
			for n := 1; n <= steps*lines; n++ {
				want = append(strconv.AppendInt(want, int64(n), 10), '\r', '\n')
			}
			is.Equal(got.Len(), len(want))        // every byte
			is.True(got.String() == string(want)) // in order
			_, others, _ := readToEnd(st)         // the agent ended: the exit frame
			is.Equal(len(others), 1)
			is.Equal(others[0].T, wire.StreamExit)
		})
	}
}

// TestAttachClientBehindWhenTheAgentEnds guards the end of the output at
// the holder: the agent writes ~2.2 MB (more than a send buffer holds,
// less than the bound) and exits while its client is not reading, so
// the holder still queues output for the client when the tree has
// ended. A client that reads late, but within the holder's grace
// (attachGrace, 5 s), gets every byte and the exit frame; one that reads
// nothing is told with one stream.slow_client frame once the holder
// ends. Neither is cut off silently.
func TestAttachClientBehindWhenTheAgentEnds(t *testing.T) {
	const lines = 300000 // ~2.2 MB of `seq`
	script := fmt.Sprintf(`stty -echo; echo ready; read x; seq 1 %d | cat`, lines)
	var want []byte
	for n := 1; n <= lines; n++ {
		want = append(strconv.AppendInt(want, int64(n), 10), '\r', '\n')
	}
	// begin attaches at the holder and lets the agent write; it returns
	// once the tree has ended (exit.json), the client having read nothing
	// of it.
	begin := func(t *testing.T) *rpc.Stream {
		is := is.New(t)
		e := start(t, "-host-runtime-enabled", "yes")
		in := e.provision(api.ProvisionRequest{PTY: true, Command: []string{"sh", "-c", script}})
		st, err := attachHops[1].open(e, in.InstanceID)
		is.NoErr(err)
		t.Cleanup(func() { st.Close() })
		readUntil(t, st, "ready\r\n")
		is.NoErr(st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("\r")}))
		exitJSON := filepath.Join(e.root, "state", "supervisord", "instances", in.InstanceID, store.FileExit)
		for end := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(exitJSON); err == nil {
				return st
			}
			if time.Now().After(end) {
				t.Fatal("the agent did not end within 60 s")
			}
		}
	}
	t.Run("a client that reads late gets everything", func(t *testing.T) {
		is := is.New(t)
		st := begin(t)
		time.Sleep(time.Second) // twice the 500 ms the holder used to give
		data, others, end := readToEnd(st)
		is.Equal(data, len(want)) // every byte
		is.Equal(len(others), 1)  // then the exit frame
		is.Equal(others[0].T, wire.StreamExit)
		is.True(errors.Is(end, io.EOF))
	})
	t.Run("a client that reads nothing is told", func(t *testing.T) {
		is := is.New(t)
		st := begin(t)
		peerClosed(t, st) // never read until the holder closed its side
		data, others, end := readToEnd(st)
		is.True(data < len(want))                    // the output still queued was dropped
		is.Equal(len(others), 1)                     // in its place, one frame:
		is.Equal(others[0].T, wire.StreamError)      // an error frame
		is.Equal(others[0].Code, api.CodeStreamSlow) // stream.slow_client
		is.True(errors.Is(end, io.EOF))              // then EOF at a frame boundary
	})
}
