//go:build linux

package holder

import (
	"context"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/outstream"
	"hostkit.dev/cmd/supervisord/internal/proc"
)

// inputTimeout bounds one write of a client's input to the PTY.
const inputTimeout = 5 * time.Second

func (h *holder) ops() []rpc.Op {
	return []rpc.Op{
		{Name: OpStatus, Handler: rpc.Handle(func(context.Context, *rpc.Call, *Empty) (*Status, error) {
			return h.status(), nil
		})},
		{Name: OpStop, Handler: rpc.Handle(func(ctx context.Context, _ *rpc.Call, req *StopRequest) (*Status, error) {
			h.stop(time.Duration(req.TimeoutMS) * time.Millisecond)
			select {
			case <-h.finished:
			case <-ctx.Done():
			case <-time.After(drainGrace + time.Second):
			}
			return h.status(), nil
		})},
		{Name: OpSignal, Handler: rpc.Handle(func(_ context.Context, _ *rpc.Call, req *SignalRequest) (Empty, error) {
			return Empty{}, h.signal(unix.Signal(req.Signal))
		})},
		{Name: OpAttach, Handler: rpc.Handle(func(_ context.Context, _ *rpc.Call, req *AttachRequest) (Empty, error) {
			if req.Rows > 0 && req.Cols > 0 {
				_ = h.resize(req.Rows, req.Cols)
			}
			return Empty{}, nil
		}), Stream: h.attach},
	}
}

func (h *holder) status() *Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &Status{AgentPID: int64(h.leader), PGID: int64(h.pgid), Exit: h.exit, State: h.stateLocked(), Restarts: int64(h.restarts)}
	if !isClosed(h.treeEmpty) {
		s.Descendants = int64(len(proc.Descendants(os.Getpid())))
	}
	return s
}

// resize sets the PTY size. instance.exited once the leader is reaped.
func (h *holder) resize(rows, cols uint16) error {
	h.mu.Lock()
	p, leaderDone := h.pty, h.leaderDone
	h.mu.Unlock()
	if p == nil {
		return wire.Errorf(api.CodeInstanceInvalid, "the instance has no terminal of the holder's (tmux: resize through tmux attach)")
	}
	if isClosed(leaderDone) {
		return errExited
	}
	return setSize(p, rows, cols)
}

// input writes b to the PTY (dropped without one, or after exit).
func (h *holder) input(b []byte) {
	h.mu.Lock()
	p := h.pty
	h.mu.Unlock()
	if p == nil || isClosed(h.finished) {
		return
	}
	p.SetWriteDeadline(time.Now().Add(inputTimeout))
	_, _ = p.Write(b)
}

// endedMsg is the message of the stream.slow_client frame a client gets
// when the holder ends before the client took its output (attachGrace).
const endedMsg = "client did not take the output before the holder ended"

// attach replays the ring, then streams output until the client detaches,
// falls behind (one stream.slow_client frame, then the end), or the tree
// ends (the output still queued, then an exit frame). Every frame goes
// out whole: the Writer writes only what the client's socket takes
// without blocking, and the client's queue (outstream.Queue) decides that
// it is slow. When the holder stops serving (ctx) before the client took
// everything, the client gets stream.slow_client in place of the rest:
// a stream never ends without its end frame unless the client left.
func (h *holder) attach(ctx context.Context, call *rpc.Call, st *rpc.Stream) error {
	h.attaching.Add(1)
	defer h.attaching.Add(-1)
	w := outstream.NewWriter(st.Conn())
	q := outstream.NewQueue(true, w.Interrupt)
	h.hub.subscribe(q)
	defer h.hub.unsubscribe(q)
	ended := &wire.StreamFrame{T: wire.StreamError, Code: api.CodeStreamSlow, Msg: endedMsg}
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			f, err := st.Recv()
			if err != nil {
				if ctx.Err() != nil {
					// The server woke this read because the holder
					// stops serving: not the client leaving.
					q.Abort(ended)
				} else {
					q.Abort(nil)
				}
				return
			}
			switch f.T {
			case wire.StreamData:
				h.input(f.B)
			case wire.StreamResize:
				if err := h.resize(f.Rows, f.Cols); err != nil {
					we := wire.AsError(err)
					q.Abort(&wire.StreamFrame{T: wire.StreamError, Code: we.Code, Msg: we.Msg})
					return
				}
			case wire.StreamDetach, wire.StreamExit, wire.StreamError:
				q.Abort(nil)
				return
			}
		}
	}()
	stop := context.AfterFunc(ctx, func() { q.Abort(ended) })
	defer stop()
	defer func() { st.Close(); <-recvDone }()
	complete, err := outstream.Send(q, w)
	if n := q.Dropped(); n > 0 {
		h.log.Warn("holder.attach_dropped", slog.String("code", api.CodeStreamSlow), slog.Int("behind_bytes", n))
	} else if !complete && ctx.Err() != nil {
		h.log.Warn("holder.attach_dropped", slog.String("code", api.CodeStreamSlow), slog.String("reason", "holder_ended"))
	}
	if err != nil || !complete {
		return nil
	}
	return h.sendExit(q, w)
}

// sendExit waits for the leader's exit status and sends the exit frame
// (unless the stream was aborted first: the client left, the holder
// stops serving).
func (h *holder) sendExit(q *outstream.Queue, w *outstream.Writer) error {
	h.mu.Lock()
	leaderDone := h.leaderDone
	h.mu.Unlock()
	select {
	case <-leaderDone:
	case <-q.Done():
		return nil
	}
	h.mu.Lock()
	code := ExitCode(h.exit)
	h.mu.Unlock()
	_ = w.Frame(&wire.StreamFrame{T: wire.StreamExit, Status: code})
	return nil
}
