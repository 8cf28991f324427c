package manager

import (
	"context"
	"sync"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/holder"
)

// OpenAttach accepts an attach: it opens the holder's attach stream, kept
// for AttachStream under the call's id. instance.exited when the instance
// has ended, instance.not_running when no holder serves it.
func (m *Manager) OpenAttach(ctx context.Context, call *rpc.Call, req *api.AttachRequest) (*api.AttachResponse, error) {
	md, err := m.load(req.InstanceID)
	if err != nil {
		return nil, err
	}
	if terminal(md.State) {
		return nil, wire.Errorf(api.CodeInstanceExited, "instance %s has ended", md.ID)
	}
	c := m.holderClient(md.ID, holderTimeout)
	hs, err := c.OpenStream(ctx, holder.OpAttach, &holder.AttachRequest{Rows: req.Rows, Cols: req.Cols}, nil)
	if err != nil {
		if !m.holderAlive(md.ID) {
			return nil, wire.Errorf(api.CodeInstanceNotRunning, "instance %s is not running", md.ID)
		}
		return nil, err
	}
	m.streams.Store(string(call.ID), hs)
	return &api.AttachResponse{State: md.State}, nil
}

// AttachStream relays frames between the client and the holder until
// either side ends. A client that cannot take a frame for 5 s is dropped;
// the holder's own bounded queue keeps it from blocking the agent.
func (m *Manager) AttachStream(ctx context.Context, call *rpc.Call, st *rpc.Stream) error {
	v, ok := m.streams.LoadAndDelete(string(call.ID))
	if !ok {
		return wire.Errorf(wire.CodeInternal, "attach stream was not opened")
	}
	hs := v.(*rpc.Stream)
	var wg sync.WaitGroup
	var once sync.Once
	closeBoth := func() { once.Do(func() { hs.Close(); st.Close() }) }
	wg.Add(2)
	go func() { // holder → client
		defer wg.Done()
		defer closeBoth()
		for {
			f, err := hs.Recv()
			if err != nil {
				st.Conn().SetWriteDeadline(time.Now().Add(time.Second))
				_ = st.Send(&wire.StreamFrame{T: wire.StreamError, Code: api.CodeInstanceNotRunning, Msg: "the holder ended the stream"})
				return
			}
			st.Conn().SetWriteDeadline(time.Now().Add(5 * time.Second))
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
			hs.Conn().SetWriteDeadline(time.Now().Add(5 * time.Second))
			if err := hs.Send(f); err != nil {
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
