//go:build linux

package holder

import (
	"context"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/proc"
)

// sendTimeout bounds one write to an attached client: a client that cannot
// take a frame in this time is dropped.
const sendTimeout = 5 * time.Second

func (h *holder) ops() []rpc.Op {
	return []rpc.Op{
		{Name: OpStatus, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req Empty
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return h.status(), nil
		}},
		{Name: OpStop, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req StopRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			h.stop(time.Duration(req.TimeoutMS) * time.Millisecond)
			select {
			case <-h.finished:
			case <-ctx.Done():
			case <-time.After(drainGrace + time.Second):
			}
			return h.status(), nil
		}},
		{Name: OpSignal, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req SignalRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			if req.Signal <= 0 || req.Signal > 64 {
				return nil, wire.Errorf(api.CodeSignalInvalid, "signal out of range")
			}
			return Empty{}, h.signal(unix.Signal(req.Signal))
		}},
		{Name: OpAttach, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req AttachRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			if req.Rows > 0 && req.Cols > 0 {
				_ = h.resize(req.Rows, req.Cols)
			}
			return Empty{}, nil
		}, Stream: h.attach},
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
	p.SetWriteDeadline(time.Now().Add(sendTimeout))
	_, _ = p.Write(b)
}

// attach replays the ring, then streams output until the client detaches,
// falls behind (stream.slow_client), or the tree ends (an exit frame).
func (h *holder) attach(ctx context.Context, call *rpc.Call, st *rpc.Stream) error {
	snap, cl := h.hub.subscribe()
	defer h.hub.unsubscribe(cl)
	setSendBuffer(st.Conn())
	// Data frames are written without copying the output (DataWriter);
	// wmu keeps them and st.Send's frames whole.
	var wmu sync.Mutex
	var dw DataWriter
	send := func(f *wire.StreamFrame) error {
		wmu.Lock()
		defer wmu.Unlock()
		st.Conn().SetWriteDeadline(time.Now().Add(sendTimeout))
		return st.Send(f)
	}
	sendData := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		st.Conn().SetWriteDeadline(time.Now().Add(sendTimeout))
		return dw.Write(st.Conn(), b)
	}
	recvDone := make(chan error, 1)
	go func() {
		for {
			f, err := st.Recv()
			if err != nil {
				recvDone <- err
				return
			}
			switch f.T {
			case wire.StreamData:
				h.input(f.B)
			case wire.StreamResize:
				if err := h.resize(f.Rows, f.Cols); err != nil {
					we := wire.AsError(err)
					_ = send(&wire.StreamFrame{T: wire.StreamError, Code: we.Code, Msg: we.Msg})
					recvDone <- nil
					return
				}
			case wire.StreamDetach, wire.StreamExit, wire.StreamError:
				recvDone <- nil
				return
			}
		}
	}()
	defer func() { st.Close(); <-recvDone }()
	for len(snap) > 0 {
		n := min(len(snap), 64<<10)
		if err := send(&wire.StreamFrame{T: wire.StreamData, B: snap[:n]}); err != nil {
			return nil
		}
		snap = snap[n:]
	}
	for {
		select {
		case <-cl.ready:
			b, ended := h.hub.take(cl)
			if len(b) > 0 {
				if err := sendData(b); err != nil {
					return nil
				}
			}
			if ended {
				return h.sendExit(ctx, send)
			}
		case <-cl.dropped:
			_ = send(&wire.StreamFrame{T: wire.StreamError, Code: api.CodeStreamSlow, Msg: "client fell behind the output and was dropped"})
			return nil
		case err := <-recvDone:
			recvDone <- err
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// sendExit waits for the leader's exit status and sends the exit frame.
func (h *holder) sendExit(ctx context.Context, send func(*wire.StreamFrame) error) error {
	h.mu.Lock()
	leaderDone := h.leaderDone
	h.mu.Unlock()
	select {
	case <-leaderDone:
	case <-ctx.Done():
		return nil
	}
	h.mu.Lock()
	code := ExitCode(h.exit)
	h.mu.Unlock()
	_ = send(&wire.StreamFrame{T: wire.StreamExit, Status: code})
	return nil
}

// sendBuffer is the send buffer of an attach connection: room for a few
// frames of FrameMax bytes, so that a sender hands a whole frame to the
// kernel and the reader takes it in one read, instead of the two sides
// taking turns at the default ~200 KiB (wmem_default). The kernel caps it
// at net.core.wmem_max.
const sendBuffer = 4 * FrameMax

// setSendBuffer sets c's send buffer to sendBuffer when c is a socket.
func setSendBuffer(c net.Conn) {
	if s, ok := c.(interface{ SetWriteBuffer(int) error }); ok {
		_ = s.SetWriteBuffer(sendBuffer)
	}
}
