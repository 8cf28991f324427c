package manager

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/outstream"
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
		if !m.h.alive(md.ID) {
			if m.ended(ctx, md, true) {
				return nil, wire.Errorf(api.CodeInstanceExited, "instance %s has ended", md.ID)
			}
			return nil, wire.Errorf(api.CodeInstanceNotRunning, "instance %s is not running", md.ID)
		}
		return nil, err
	}
	m.streams.Store(string(call.ID), openedAttach{hc: hc, id: md.ID})
	return &api.AttachResponse{State: md.State}, nil
}

// openedAttach is an attach stream OpenAttach opened at the holder, kept
// for AttachStream.
type openedAttach struct {
	hc *net.UnixConn
	id string // the instance id
}

// ended reports whether md's tree has ended although metadata.json does
// not say so yet: the holder reports a terminal state while it serves its
// last clients the exit frame, or (holderGone) the holder has just ended
// and a reconcile records its exit.json.
func (m *Manager) ended(ctx context.Context, md *store.Metadata, holderGone bool) bool {
	if !holderGone {
		s, err := m.h.status(ctx, md.ID)
		return err == nil && terminal(s.State)
	}
	if unlock, ok := m.tryLock(md.ID); ok {
		defer unlock()
		m.reconcile(ctx, md)
	}
	return terminal(md.State)
}

// AttachStream relays frames between the client and the holder until
// either side ends. The holder's output goes through a queue of the
// relay's own (outstream.Queue), read from the holder as it comes, so the
// relay never stalls the holder; a client that falls more than
// api.AttachBacklog behind here gets one whole stream.slow_client frame
// and the end, as at the holder. Data frames are taken from the holder
// without decoding (outstream.DataOf); any other frame is decoded (and so
// validated) before it is passed on.
func (m *Manager) AttachStream(ctx context.Context, call *rpc.Call, st *rpc.Stream) error {
	v, ok := m.streams.LoadAndDelete(string(call.ID))
	if !ok {
		return wire.Errorf(wire.CodeInternal, "attach stream was not opened")
	}
	hc, id := v.(openedAttach).hc, v.(openedAttach).id
	w := outstream.NewWriter(st.Conn())
	q := outstream.NewQueue(false, w.Interrupt)
	var once sync.Once
	closeBoth := func() { once.Do(func() { q.Abort(nil); hc.Close(); st.Close() }) }
	var wg sync.WaitGroup
	defer wg.Wait() // after closeBoth (defers run last first)
	defer closeBoth()
	stop := context.AfterFunc(ctx, closeBoth)
	defer stop()
	wg.Add(2)
	go func() { defer wg.Done(); fromHolder(hc, q) }()
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
	_, _ = outstream.Send(q, w)
	if n := q.Dropped(); n > 0 {
		m.cfg.Logger.Warn("instance.attach_dropped", slog.String("instance", id), slog.String("code", api.CodeStreamSlow), slog.Int("behind_bytes", n))
	}
	return nil
}

// fromHolder reads the holder's frames into q until the stream ends:
// output is added as it comes; the holder's stream.slow_client (the relay
// itself fell behind) aborts q, so the client is told at once; another
// frame that ends the stream ends q after the output; a holder that ends
// the stream without one (it closed, or cut a frame) ends q with
// instance.not_running. Past the relay's bound, q aborts itself
// (stream.slow_client) and the holder's connection is closed.
func fromHolder(hc net.Conn, q *outstream.Queue) {
	notRunning := &wire.StreamFrame{T: wire.StreamError, Code: api.CodeInstanceNotRunning, Msg: "the holder ended the stream"}
	fr := frameReader{c: hc}
	for {
		frame, err := fr.next()
		if err != nil {
			q.End(notRunning)
			return
		}
		b, isData := outstream.DataOf(frame[4:])
		if !isData {
			f, err := wire.DecodeStreamFrame(frame[4:]) // validates it
			switch {
			case err != nil:
				q.End(notRunning)
				return
			case f.T == wire.StreamError && f.Code == api.CodeStreamSlow:
				q.Abort(f)
				return
			case f.Ends():
				q.End(f)
				return
			case f.T != wire.StreamData:
				continue // resize, eof: nothing for the client
			}
			b = f.B
		}
		if _, ok := q.Add(b); !ok {
			hc.Close()
			return
		}
	}
}
