package rpc

import (
	"bufio"
	"net"
	"sync"

	"hostkit.dev/lib/wire"
)

// Stream carries stream frames (docs/protocol.md, "Stream frames") over a
// connection after its op was accepted. Send is safe for concurrent use; Recv
// must be called from one goroutine.
type Stream struct {
	conn net.Conn
	br   *bufio.Reader // reads c, holding what arrived with the accepting frame
	max  int
	wmu  sync.Mutex
	wbuf []byte // guarded by wmu
}

func newStream(c net.Conn, br *bufio.Reader, max int) *Stream {
	return &Stream{conn: c, br: br, max: max}
}

// Send writes one frame. Errors come from the connection (closed, write
// deadline) or from encoding.
func (st *Stream) Send(f *wire.StreamFrame) error {
	payload, err := wire.Marshal(f)
	if err != nil {
		return err
	}
	st.wmu.Lock()
	defer st.wmu.Unlock()
	frame, err := finishFrame(append(beginFrame(st.wbuf), payload...), st.max)
	if err != nil {
		return err
	}
	_, err = st.conn.Write(frame)
	st.wbuf = keepBuf(frame)
	return err
}

// Recv reads one frame. io.EOF when the peer closed; frame.* and
// request.unknown_field codes for bad frames.
func (st *Stream) Recv() (*wire.StreamFrame, error) {
	p, err := readFrame(st.br, st.max)
	if err != nil {
		return nil, err
	}
	return wire.DecodeStreamFrame(p)
}

// Conn returns the underlying connection, e.g. to set deadlines.
func (st *Stream) Conn() net.Conn { return st.conn }

// Close closes the connection, which ends the stream for both sides.
func (st *Stream) Close() error { return st.conn.Close() }
