package rpc

import (
	"net"
	"sync"

	"hostkit.dev/lib/wire"
)

// Stream carries stream frames (DESIGN.md, "Streams") over a connection
// after its op was accepted. Send is safe for concurrent use; Recv must be
// called from one goroutine.
type Stream struct {
	conn net.Conn
	max  int
	wmu  sync.Mutex
}

func newStream(c net.Conn, max int) *Stream { return &Stream{conn: c, max: max} }

// Send writes one frame. Errors come from the connection (closed, write
// deadline) or from encoding.
func (st *Stream) Send(f *wire.StreamFrame) error {
	payload, err := wire.Marshal(f)
	if err != nil {
		return err
	}
	st.wmu.Lock()
	defer st.wmu.Unlock()
	return wire.WriteFrame(st.conn, payload, st.max)
}

// Recv reads one frame. io.EOF when the peer closed; frame.* and
// request.unknown_field codes for bad frames.
func (st *Stream) Recv() (*wire.StreamFrame, error) {
	p, err := wire.ReadFrame(st.conn, st.max)
	if err != nil {
		return nil, err
	}
	return wire.DecodeStreamFrame(p)
}

// Conn returns the underlying connection, e.g. to set deadlines.
func (st *Stream) Conn() net.Conn { return st.conn }

// Close closes the connection, which ends the stream for both sides.
func (st *Stream) Close() error { return st.conn.Close() }
