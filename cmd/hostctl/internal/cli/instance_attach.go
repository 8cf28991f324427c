package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"
	"golang.org/x/term"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// detachKey is Ctrl-]: typed in an attached terminal, it detaches.
const detachKey = 0x1d

func instanceAttachCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("instance attach")
	return &ffcli.Command{
		Name:       "attach",
		ShortUsage: "hostctl instance attach ID",
		ShortHelp:  "attach to an instance's terminal (detach with Ctrl-])",
		LongHelp:   "Puts the local terminal in raw mode, replays the instance's recent output, forwards input and window size changes, and detaches on Ctrl-] (the instance keeps running). A tmux-backed instance is attached with `tmux -S <socket> attach`. The stream is raw terminal data; --json does not apply. A session that fails after it began exits 125 with the code on stderr: stream.slow_client when the output got more than 4 MiB ahead of this client at any hop, its own stdout included (the instance runs on), or a stream that broke (hostctl help exit-codes).",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			id, err := oneArg(fs, args, "instance attach", "an instance ID")
			if err != nil {
				return err
			}
			c, done, err := g.supervisord()
			if err != nil {
				return err
			}
			defer done()
			in, err := c.Status(ctx, id)
			if err != nil {
				return err
			}
			if in.SessionBackend == api.BackendTmux {
				return g.attachTmux(ctx, in.InstanceID)
			}
			return g.attach(ctx, c, in.InstanceID)
		},
	}
}

// attachTmux runs tmux attach on the instance's tmux socket.
func (g *globals) attachTmux(ctx context.Context, id string) error {
	sock, err := g.socket(daemon.NameSupervisord)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "tmux", "-S", filepath.Join(filepath.Dir(sock), "h", api.Hex16(id)+".tmux"), "attach")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = g.stdin, g.stdout, g.stderr
	return cmd.Run()
}

// attach runs one attach session: stdin → data frames (Ctrl-] → detach),
// data frames → stdout, SIGWINCH → resize frames. With a terminal on
// stdin it is put in raw mode for the session. The stream is read as it
// arrives, whatever stdout does, so an error frame is always seen; output
// waits for stdout in a queue bounded as the server's (api.AttachBacklog),
// past which hostctl drops itself (stream.slow_client). A failure after
// the session began is a sessionError (ExitAttach).
func (g *globals) attach(ctx context.Context, c *api.Client, id string) error {
	req := &api.AttachRequest{InstanceID: id}
	inFile, isFile := g.stdin.(*os.File)
	tty := isFile && term.IsTerminal(int(inFile.Fd()))
	if tty {
		if w, h, err := term.GetSize(int(inFile.Fd())); err == nil {
			req.Cols, req.Rows = uint16(w), uint16(h)
		}
	}
	st, _, err := c.Attach(ctx, req)
	if err != nil {
		return err
	}
	defer st.Close()
	if tty {
		old, err := term.MakeRaw(int(inFile.Fd()))
		if err != nil {
			return fmt.Errorf("raw mode: %w", err)
		}
		defer term.Restore(int(inFile.Fd()), old)
		fmt.Fprint(g.stderr, "[attached; detach with Ctrl-]]\r\n")
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go forwardResize(wctx, winch, int(inFile.Fd()), st)
	}
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	out := newOutputQueue()
	written := make(chan error, 1)
	go func() { written <- out.writeTo(g.stdout) }()
	inputDone := make(chan error, 1)
	go func() { inputDone <- forwardInput(g.stdin, st) }()
	res := make(chan error, 1)
	go func() { res <- readOutput(st, out) }()
	writeFailed := func(err error) error {
		return sessionError{fmt.Errorf("writing the output: %w", err)}
	}
	drained := false
	select {
	case err = <-res:
	case err = <-written: // a write to stdout failed (the queue is not closed yet)
		err, drained = writeFailed(err), true
	case err = <-inputDone:
		// Detached (Ctrl-] or end of input): the server ends the stream.
		// Whatever ends the stream after our detach (a detach frame, an
		// error frame as the holder closes, EOF) is not a failure.
		if err == nil {
			st.Send(&wire.StreamFrame{T: wire.StreamDetach})
			select {
			case <-res:
			case <-time.After(2 * time.Second):
			}
		} else {
			err = sessionError{connectionError(err)}
		}
	}
	// Output already received goes to stdout first: all of it after a
	// clean end; after a failure, what stdout takes within a second.
	out.close()
	switch {
	case drained:
	case err == nil:
		if werr := <-written; werr != nil {
			err = writeFailed(werr)
		}
	default:
		select {
		case <-written:
		case <-time.After(time.Second):
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if tty && err == nil {
		fmt.Fprint(g.stderr, "\r\n[detached]\r\n")
	}
	return err
}

// forwardResize sends the terminal's size on every SIGWINCH.
func forwardResize(ctx context.Context, winch <-chan os.Signal, fd int, st *rpc.Stream) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-winch:
			if w, h, err := term.GetSize(fd); err == nil {
				if api.Resize(st, uint16(h), uint16(w)) != nil {
					return
				}
			}
		}
	}
}

// forwardInput sends stdin as data frames until Ctrl-] or the end of
// input (nil), or a send error.
func forwardInput(r io.Reader, st *rpc.Stream) error {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			b := buf[:n]
			for i, c := range b {
				if c == detachKey {
					if i > 0 {
						if err := st.Send(&wire.StreamFrame{T: wire.StreamData, B: b[:i]}); err != nil {
							return err
						}
					}
					return nil
				}
			}
			if err := st.Send(&wire.StreamFrame{T: wire.StreamData, B: append([]byte(nil), b...)}); err != nil {
				return err
			}
		}
		if err != nil {
			return nil
		}
	}
}

// readOutput reads the stream into out until it ends: nil after an exit,
// detach or eof frame; a sessionError for an error frame, for a stream
// that ended without one of those, for a frame that does not arrive whole
// or does not decode, and when out is full (stdout fell behind).
func readOutput(st *rpc.Stream, out *outputQueue) error {
	for {
		f, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return sessionError{wire.Errorf(wire.CodeConnectionClosed, "the attach stream ended without an exit, detach or error frame")}
		}
		if err != nil {
			return sessionError{connectionError(err)}
		}
		switch f.T {
		case wire.StreamData:
			if !out.add(f.B) {
				return sessionError{wire.Errorf(api.CodeStreamSlow, "standard output fell %d MiB behind the instance's output; hostctl dropped the attach (the instance runs on)", api.AttachBacklog>>20)}
			}
		case wire.StreamExit, wire.StreamDetach, wire.StreamEOF:
			return nil
		case wire.StreamError:
			return sessionError{wire.Errorf(f.Code, "%s", f.Msg)}
		}
	}
}

// connectionError is err as a *wire.Error: its own (frame.truncated,
// frame.malformed, ...), or connection.closed for a failure of the
// connection itself.
func connectionError(err error) *wire.Error {
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	return &wire.Error{Code: wire.CodeConnectionClosed, Msg: "the attach connection failed: " + err.Error(), Err: err}
}

// outputQueue holds output received but not yet written to stdout, at
// most api.AttachBacklog bytes, so that reading the stream never waits
// for stdout. Its writer swaps the buffer for its own and writes all of
// it at once.
type outputQueue struct {
	mu     sync.Mutex
	pend   []byte
	closed bool
	ready  chan struct{} // capacity 1: pend grew or the queue closed
}

func newOutputQueue() *outputQueue { return &outputQueue{ready: make(chan struct{}, 1)} }

// add appends a copy of b; false when that would pass the bound.
func (q *outputQueue) add(b []byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.pend)+len(b) > api.AttachBacklog {
		return false
	}
	q.pend = append(q.pend, b...)
	q.signal()
	return true
}

// close ends the queue: writeTo returns once it wrote what is pending.
func (q *outputQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.signal()
}

func (q *outputQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// writeTo writes the queue's output to w until the queue is closed and
// empty (nil) or a write fails.
func (q *outputQueue) writeTo(w io.Writer) error {
	var spare []byte
	for range q.ready {
		q.mu.Lock()
		b, closed := q.pend, q.closed
		q.pend = spare[:0]
		q.mu.Unlock()
		spare = b
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		if closed {
			return nil
		}
	}
	return nil
}
