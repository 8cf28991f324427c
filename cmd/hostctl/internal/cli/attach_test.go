package cli

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// flood is an agent that writes output as fast as its PTY takes it.
var flood = []string{"--pty", "--", "sh", "-c", "exec yes 0123456789abcdefghijklmnopqrstuvwxyz"}

// attachProc is the hostctl binary running `instance attach`, its stdin a
// pipe kept open (so it never detaches by itself).
type attachProc struct {
	cmd    *exec.Cmd
	stdin  *os.File // the write end
	stderr *syncBuf
	done   chan int // the exit status
}

// startAttach runs `hostctl <global...> instance attach id` with stdout.
func startAttach(t *testing.T, stdout *os.File, global []string, id string) *attachProc {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &attachProc{stdin: pw, stderr: &syncBuf{mu: make(chan struct{}, 1)}, done: make(chan int, 1)}
	p.cmd = exec.Command(filepath.Join(binDir, "hostctl"), append(global, "instance", "attach", id)...)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = pr, stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	go func() { p.done <- exitStatus(p.cmd.Wait()) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		pw.Close()
	})
	return p
}

// wait returns the exit status, failing after 60 s.
func (p *attachProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.done:
		return code
	case <-time.After(60 * time.Second):
		t.Fatalf("hostctl attach did not end: %s", p.stderr)
		return -1
	}
}

// attachStillWorks checks that instance id runs and that a new attach
// (in process) gets its output and detaches with exit 0.
func attachStillWorks(t *testing.T, root, id, want string) {
	t.Helper()
	is := is.New(t)
	_, sout, _ := runCLI("-root", root, "instance", "status", id, "--json")
	is.True(strings.Contains(sout, `"state": "running"`)) // the agent runs on
	pr, pw, err := os.Pipe()
	is.NoErr(err)
	defer pw.Close()
	out := &syncBuf{mu: make(chan struct{}, 1)}
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(context.Background(), []string{"-root", root, "instance", "attach", id}, pr, out, &errb)
	}()
	waitOutput(t, out, want)
	pw.Write([]byte{detachKey})
	select {
	case code := <-done:
		is.Equal(code, ExitOK) // a real detach
	case <-time.After(30 * time.Second):
		t.Fatal("attach did not detach on Ctrl-]")
	}
}

// TestAttachStalledStdoutExits125 guards against hostctl that hangs or
// exits 0 when it cannot deliver the output: with a stdout nobody reads,
// it keeps reading the stream, drops itself once 4 MiB are waiting for
// stdout, prints stream.slow_client and exits 125. The agent runs on.
func TestAttachStalledStdoutExits125(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := startSupervisord(t)
	in := provisionJSON(t, root, flood...)
	pr, pw, err := os.Pipe() // never read
	is.NoErr(err)
	defer pr.Close()
	p := startAttach(t, pw, []string{"-root", root}, in.InstanceID)
	pw.Close()
	is.Equal(p.wait(t), ExitAttach)
	// The code, on stderr: hostctl's own word, or its server's when the
	// relay found hostctl behind first (a loaded machine reads slowly).
	stderr := p.stderr.String()
	is.True(strings.Contains(stderr, "hostctl: stream.slow_client: standard output fell 4 MiB behind") ||
		strings.Contains(stderr, "hostctl: stream.slow_client: client fell behind the output and was dropped"))
	attachStillWorks(t, root, in.InstanceID, "xyz\r\n")
}

// TestAttachStoppedReaderIsToldByTheServer guards the server's word
// reaching hostctl through every hop: while the agent floods, one reader on
// the path is stopped (SIGSTOP) so it reads nothing, and the hop before it
// drops it with one whole stream.slow_client frame. Stopping hostctl, its
// server is supervisord's relay (or the holder, when the relay was the
// slower); stopping supervisord, the holder drops the relay, and the relay
// passes the frame on once it runs again. Resumed, hostctl reads the output
// the sockets still hold, then that frame, prints it and exits 125; the
// agent runs on.
func TestAttachStoppedReaderIsToldByTheServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		supervis bool // stop supervisord (else hostctl)
	}{
		{"hostctl stopped", false},
		{"supervisord stopped", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			root := shortRoot(t)
			os.Chmod(root, 0o755)
			sv := startDaemon(t, "supervisord", "supervisord", root, "-host-runtime-enabled", "yes", "-egress-required", "no")
			in := provisionJSON(t, root, flood...)
			out, err := os.Create(filepath.Join(root, "attach.out")) // a stdout that keeps up
			is.NoErr(err)
			defer out.Close()
			p := startAttach(t, out, []string{"-root", root}, in.InstanceID)
			waitFileSize(t, out.Name(), 1)
			stopped := p.cmd.Process
			if tc.supervis {
				stopped = sv.cmd.Process
			}
			is.NoErr(stopped.Signal(syscall.SIGSTOP))
			defer stopped.Signal(syscall.SIGCONT)
			holderErr := filepath.Join(root, "state", "supervisord", "instances", in.InstanceID, "holder.err")
			for end := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				b, _ := os.ReadFile(holderErr)
				if strings.Contains(sv.stderr.String(), "instance.attach_dropped") || strings.Contains(string(b), "holder.attach_dropped") {
					break
				}
				if time.Now().After(end) {
					t.Fatalf("nobody dropped the stopped reader: %s", sv.stderr)
				}
			}
			is.NoErr(stopped.Signal(syscall.SIGCONT))
			is.Equal(p.wait(t), ExitAttach)
			is.True(strings.Contains(p.stderr.String(), "hostctl: stream.slow_client: client fell behind the output and was dropped")) // the server's frame, whole
			attachStillWorks(t, root, in.InstanceID, "xyz\r\n")
		})
	}
}

// waitFileSize waits (up to 30 s) until the file at path has at least n
// bytes.
func waitFileSize(t *testing.T, path string, n int64) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if fi, err := os.Stat(path); err == nil && fi.Size() >= n {
			return
		}
	}
	t.Fatalf("%s never reached %d bytes", path, n)
}

// TestAttachKeepsUpAndOutputIsWhole: hostctl with a stdout that keeps up
// writes the agent's output byte for byte (3 MiB: the backlog cannot be
// reached however slow the machine) and exits 0 when the agent ends.
func TestAttachKeepsUpAndOutputIsWhole(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := startSupervisord(t)
	const lines = 400000 // ~2.9 MB of `seq`, after the input that starts it
	// "ready" once input is no longer echoed: input sent before that
	// would come back as output.
	in := provisionJSON(t, root, "--pty", "--", "sh", "-c", "stty -echo; echo ready; read x; seq 1 400000 | cat")
	out, err := os.Create(filepath.Join(root, "attach.out"))
	is.NoErr(err)
	defer out.Close()
	p := startAttach(t, out, []string{"-root", root}, in.InstanceID)
	waitFileSize(t, out.Name(), int64(len("ready\r\n")))
	_, err = p.stdin.Write([]byte("\n"))
	is.NoErr(err)
	if code := p.wait(t); code != ExitOK { // the exit frame ends the session
		t.Fatalf("hostctl attach exited %d: %s", code, p.stderr)
	}
	var want strings.Builder
	want.WriteString("ready\r\n")
	for n := 1; n <= lines; n++ {
		want.WriteString(strconv.Itoa(n) + "\r\n")
	}
	got, err := os.ReadFile(out.Name())
	is.NoErr(err)
	is.Equal(len(got), want.Len())        // every byte
	is.True(string(got) == want.String()) // in order
}

// TestAttachStreamFailuresExit125 guards against a broken stream that
// hostctl reports as success: against a server that accepts the attach,
// sends one whole data frame and then breaks the stream in one way, hostctl
// writes the output it received, prints the failure's code and exits 125;
// an exit frame instead is a success.
func TestAttachStreamFailuresExit125(t *testing.T) {
	t.Parallel()
	whole := wire.AppendFrame(nil, mustMarshal(t, &wire.StreamFrame{T: wire.StreamData, B: []byte("before-the-break\n")}))
	half := wire.AppendFrame(nil, mustMarshal(t, &wire.StreamFrame{T: wire.StreamData, B: bytes.Repeat([]byte("x"), 1000)}))
	half = half[:len(half)/2]
	for _, tc := range []struct {
		name string
		then []byte // written after the whole data frame, then the server closes
		want int
		code string // in stderr, as "hostctl: <code>: "
	}{
		{"cut inside a frame", half, ExitAttach, wire.CodeFrameTruncated},
		{"cut inside a header", []byte{0, 0}, ExitAttach, wire.CodeFrameTruncated},
		{"closed without an end frame", nil, ExitAttach, wire.CodeConnectionClosed},
		{"a frame that does not decode", wire.AppendFrame(nil, []byte{0x81, 0xa1, 't', 0xa3, 'z', 'z', 'z'}), ExitAttach, wire.CodeFrameMalformed},
		{"an error frame", wire.AppendFrame(nil, mustMarshal(t, &wire.StreamFrame{T: wire.StreamError, Code: api.CodeStreamSlow, Msg: "dropped"})), ExitAttach, api.CodeStreamSlow},
		{"an exit frame", wire.AppendFrame(nil, mustMarshal(t, &wire.StreamFrame{T: wire.StreamExit, Status: 3})), ExitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := brokenAttachServer(t, append(append([]byte(nil), whole...), tc.then...))
			out, err := os.Create(filepath.Join(filepath.Dir(path), "attach.out"))
			is.NoErr(err)
			defer out.Close()
			p := startAttach(t, out, []string{"-supervisord-socket", path}, api.NewID())
			is.Equal(p.wait(t), tc.want) // exit status
			got, err := os.ReadFile(out.Name())
			is.NoErr(err)
			is.Equal(string(got), "before-the-break\n") // the output before the break
			if tc.code != "" {
				is.True(strings.Contains(p.stderr.String(), "hostctl: "+tc.code+": ")) // the code, on stderr
			} else {
				is.Equal(p.stderr.String(), "")
			}
		})
	}
}

func mustMarshal(t *testing.T, f *wire.StreamFrame) []byte {
	t.Helper()
	p, err := wire.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// brokenAttachServer serves instance.status (a native session) and
// instance.attach on a socket of its own; the attach stream writes raw
// (exactly those bytes, whatever they are) and closes. It returns the
// socket path. A stand-in for supervisord, for faults a real one cannot be
// made to produce on demand.
func brokenAttachServer(t *testing.T, raw []byte) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "hk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s", "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	l, err := sock.Listen(ctx, sock.Config{Path: path, Group: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rpc.NewServer(rpc.Config{Daemon: "fake", Logger: slog.New(slog.DiscardHandler), Roles: rpc.Roles{"admin": {uint32(os.Geteuid())}}},
		rpc.Op{Name: api.OpStatus, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req api.IDRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return &api.Instance{InstanceID: req.InstanceID, State: api.StateRunning, PTY: true}, nil
		}},
		rpc.Op{Name: api.OpAttach, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			return &api.AttachResponse{State: api.StateRunning}, nil
		}, Stream: func(ctx context.Context, call *rpc.Call, st *rpc.Stream) error {
			_, err := st.Conn().Write(raw)
			return err
		}},
	)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(served) }()
	t.Cleanup(func() { cancel(); l.Close(); <-served })
	return path
}
