package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
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
		LongHelp:   "Puts the local terminal in raw mode, replays the instance's recent output, forwards input and window size changes, and detaches on Ctrl-] (the instance keeps running). A tmux-backed instance is attached with `tmux -S <socket> attach`. The stream is raw terminal data; --json does not apply.",
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
// stdin it is put in raw mode for the session.
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
	inputDone := make(chan error, 1)
	go func() { inputDone <- forwardInput(g.stdin, st) }()
	res := make(chan error, 1)
	go func() { res <- copyOutput(st, g.stdout) }()
	select {
	case err = <-res:
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
		}
	}
	if tty {
		fmt.Fprint(g.stderr, "\r\n[detached]\r\n")
	}
	if ctx.Err() != nil {
		return nil
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

// copyOutput writes data frames to w until the stream ends: detach and a
// closed stream are nil; exit reports the status on nothing (the caller
// prints); error is the frame's error.
func copyOutput(st *rpc.Stream, w io.Writer) error {
	for {
		f, err := st.Recv()
		if err != nil {
			if wire.CodeOf(err) == wire.CodeStreamClosed || err == io.EOF {
				return nil
			}
			return err
		}
		switch f.T {
		case wire.StreamData:
			if _, err := w.Write(f.B); err != nil {
				return err
			}
		case wire.StreamExit, wire.StreamDetach, wire.StreamEOF:
			return nil
		case wire.StreamError:
			return wire.Errorf(f.Code, "%s", f.Msg)
		}
	}
}
