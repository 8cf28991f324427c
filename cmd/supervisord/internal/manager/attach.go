package manager

import (
	"context"
	"net"
	"sync"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// OpenAttach accepts an attach: it opens the holder's attach stream, kept
// for AttachStream under the call's id. instance.exited when the instance
// has ended, instance.not_running when no holder serves it.
func (m *Manager) OpenAttach(ctx context.Context, call *rpc.Call, req *api.AttachRequest) (*api.AttachResponse, error) {
	md, err := m.load(req.InstanceID)
	if err != nil {
		return nil, err
	}
	if isContainer(md) {
		return nil, errNoTerminal() // container.go
	}
	if terminal(md.State) || m.ended(ctx, md, false) {
		return nil, wire.Errorf(api.CodeInstanceExited, "instance %s has ended", md.ID)
	}
	hc, err := openHolderAttach(ctx, m.sockPath(md.ID), &holder.AttachRequest{Rows: req.Rows, Cols: req.Cols}, holderTimeout)
	if err != nil {
		if !m.holderAlive(md.ID) {
			if m.ended(ctx, md, true) {
				return nil, wire.Errorf(api.CodeInstanceExited, "instance %s has ended", md.ID)
			}
			return nil, wire.Errorf(api.CodeInstanceNotRunning, "instance %s is not running", md.ID)
		}
		return nil, err
	}
	m.streams.Store(string(call.ID), hc)
	return &api.AttachResponse{State: md.State}, nil
}

// ended reports whether md's tree has ended although metadata.json does
// not say so yet: the holder reports a terminal state while it serves its
// last clients the exit frame, or (holderGone) the holder has just ended
// and a reconcile records its exit.json.
func (m *Manager) ended(ctx context.Context, md *store.Metadata, holderGone bool) bool {
	if !holderGone {
		s, err := m.holderStatus(ctx, md.ID)
		return err == nil && terminal(s.State)
	}
	if unlock, ok := m.tryLock(md.ID); ok {
		defer unlock()
		m.reconcile(ctx, md)
	}
	return terminal(md.State)
}

// AttachStream relays frames between the client and the holder until
// either side ends. Data frames from the holder that are byte for byte
// canonical (holder.IsDataFrame) are forwarded as they are; any other
// frame is decoded (and so validated) and sent again. A client that
// cannot take a frame for 5 s is dropped; the holder's own bounded queue
// keeps it from blocking the agent.
func (m *Manager) AttachStream(ctx context.Context, call *rpc.Call, st *rpc.Stream) error {
	v, ok := m.streams.LoadAndDelete(string(call.ID))
	if !ok {
		return wire.Errorf(wire.CodeInternal, "attach stream was not opened")
	}
	hc := v.(*net.UnixConn)
	setSendBuffer(st.Conn())
	var wg sync.WaitGroup
	var once sync.Once
	closeBoth := func() { once.Do(func() { hc.Close(); st.Close() }) }
	wg.Add(2)
	go func() { // holder → client
		defer wg.Done()
		defer closeBoth()
		fr := frameReader{c: hc}
		for {
			frame, err := fr.next()
			var f *wire.StreamFrame
			if err == nil && !holder.IsDataFrame(frame[4:]) {
				f, err = wire.DecodeStreamFrame(frame[4:]) // validates it
			}
			if err != nil {
				st.Conn().SetWriteDeadline(time.Now().Add(time.Second))
				_ = st.Send(&wire.StreamFrame{T: wire.StreamError, Code: api.CodeInstanceNotRunning, Msg: "the holder ended the stream"})
				return
			}
			// Only this goroutine writes to st while the relay runs.
			st.Conn().SetWriteDeadline(time.Now().Add(5 * time.Second))
			if f == nil {
				if _, err := st.Conn().Write(frame); err != nil {
					return
				}
				continue
			}
			if err := st.Send(f); err != nil || f.Ends() {
				return
			}
		}
	}()
	go func() { // client → holder
		defer wg.Done()
		defer closeBoth()
		for {
			f, err := st.Recv()
			if err != nil {
				return
			}
			payload, err := wire.Marshal(f)
			if err != nil {
				return
			}
			hc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if err := wire.WriteFrame(hc, payload, 0); err != nil {
				return
			}
			if f.Ends() {
				// Let the holder finish; it closes its side.
				time.Sleep(10 * time.Millisecond)
				return
			}
		}
	}()
	stop := context.AfterFunc(ctx, closeBoth)
	defer stop()
	wg.Wait()
	return nil
}

// sendBuffer is the send buffer of the client's attach connection, as
// the holder's (room for a few frames of holder.FrameMax bytes); the
// kernel caps it at net.core.wmem_max.
const sendBuffer = 4 * holder.FrameMax

// setSendBuffer sets c's send buffer to sendBuffer when c is a socket.
func setSendBuffer(c net.Conn) {
	if s, ok := c.(interface{ SetWriteBuffer(int) error }); ok {
		_ = s.SetWriteBuffer(sendBuffer)
	}
}
