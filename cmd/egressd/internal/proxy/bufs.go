package proxy

import (
	"bufio"
	"io"
	"net"
	"sync"
)

// A connection's buffers are what hundreds of open streams cost while
// they wait, so a conn holds them only while it uses them. The writer is
// taken from the Server's pool for each answer (or each piece of a
// streamed one) and given back once flushed. The reader is held while a
// request is read and between requests, but not while an answer streams
// to a client that sent nothing more: the client watch then reads one
// byte straight from the connection instead (watchClient). The CONNECT
// connection of an intercepted tunnel gives both up once the 200 is
// sent: the TLS layer reads what the reader still holds, then the socket
// itself (bufConn).

// Sizes of a connection's reader and writer. A request head up to
// readBufSize is read in one step; a larger one grows the reader, by
// doubling, up to the head limit (readHead). The reader is small because
// each connection holds one from accept until its first request is read
// (a burst of new tunnels holds hundreds at once), and net/http's server
// reads with the same 4 KiB. An answer up to writeBufSize is written in
// one step; a writer is held only while an answer is written.
const (
	readBufSize  = 4 << 10
	writeBufSize = 16 << 10
)

// bufPools pools the readers and writers of a Server's connections,
// and the batches of intercepted tunnels (bufConn).
type bufPools struct {
	readers, writers, batches sync.Pool
}

// batch returns an empty batch buffer (bufConn.hold).
func (p *bufPools) batch() *[]byte {
	if p == nil {
		b := make([]byte, 0, 40<<10)
		return &b
	}
	if b, ok := p.batches.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 40<<10)
	return &b
}

// putBatch pools b, unless a large piece grew it past maxBatch.
func (p *bufPools) putBatch(b *[]byte) {
	if p != nil && cap(*b) <= maxBatch {
		*b = (*b)[:0]
		p.batches.Put(b)
	}
}

// reader returns a readBufSize reader over r.
func (p *bufPools) reader(r io.Reader) *bufio.Reader {
	if br, ok := p.readers.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, readBufSize)
}

// putReader pools br, unless readHead grew it (a larger one is dropped).
func (p *bufPools) putReader(br *bufio.Reader) {
	if br != nil && br.Size() == readBufSize {
		br.Reset(nil)
		p.readers.Put(br)
	}
}

// writer returns a writeBufSize writer to w.
func (p *bufPools) writer(w io.Writer) *bufio.Writer {
	if bw, ok := p.writers.Get().(*bufio.Writer); ok {
		bw.Reset(w)
		return bw
	}
	return bufio.NewWriterSize(w, writeBufSize)
}

// putWriter pools bw.
func (p *bufPools) putWriter(bw *bufio.Writer) {
	if bw != nil {
		bw.Reset(nil)
		p.writers.Put(bw)
	}
}

// w returns c's writer, taking one from the pool when c holds none; the
// caller ends with c.flush.
func (c *conn) w() *bufio.Writer {
	if c.bw == nil {
		c.bw = c.s.bufs.writer(c.c)
	}
	return c.bw
}

// flush writes out what c's writer holds and gives the writer back to
// the pool. A writer whose write failed is dropped (it keeps the error).
func (c *conn) flush() error {
	if c.bw == nil {
		return nil
	}
	err := c.bw.Flush()
	if err == nil {
		c.s.bufs.putWriter(c.bw)
	}
	c.bw = nil
	return err
}

// releaseBufs gives c's reader and writer back once c has served its
// last request.
func (c *conn) releaseBufs() {
	c.s.bufs.putReader(c.br)
	c.br = nil
	if c.bw != nil && c.bw.Buffered() == 0 {
		c.s.bufs.putWriter(c.bw)
	}
	c.bw = nil
}

// ahead is what a conn's reader reads: the connection, after the byte
// the client watch read from it while an answer streamed (has).
type ahead struct {
	c   net.Conn
	b   [1]byte
	has bool
}

func (a *ahead) Read(p []byte) (int, error) {
	if a.has && len(p) > 0 {
		p[0], a.has = a.b[0], false
		return 1, nil
	}
	return a.c.Read(p)
}

// bufConn is the socket under an intercepted tunnel's TLS layer (or an
// opaque tunnel's copy): it reads what the CONNECT connection's reader
// already holds (the client's first TLS bytes may have come with the
// CONNECT), then the socket directly, and gives the reader back to the
// pool then, so TLS input is not buffered twice.
//
// While a large piece of an answer is written to the client (hold to
// release), it also collects what the TLS layer writes, so that the
// piece's records (a chunk's line, two or three 16 KiB records, the
// chunk's end) leave in one write to the socket instead of one each:
// each write to a loopback socket is a system call and a wake-up of the
// reader, and a bulk answer made four of them per 32 KiB.
type bufConn struct {
	net.Conn
	r    *bufio.Reader // nil once drained
	pool *bufPools     // where r goes then, and batch comes from (nil: nowhere)

	mu    sync.Mutex // guards batch: the TLS layer writes an alert from Close's goroutine
	batch *[]byte    // while held: the bytes written, not yet sent (pooled)
}

// maxBatch is the largest batch buffer pooled again: a piece is at most
// a 32 KiB read plus what the scrubber held, and its records add a few
// dozen bytes each.
const maxBatch = 128 << 10

// Write sends p to the socket, or, while the connection is held, adds it
// to what release sends.
func (b *bufConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.batch != nil {
		*b.batch = append(*b.batch, p...)
		b.mu.Unlock()
		return len(p), nil
	}
	b.mu.Unlock()
	return b.Conn.Write(p)
}

// hold makes the writes that follow wait for release.
func (b *bufConn) hold() {
	b.mu.Lock()
	if b.batch == nil {
		b.batch = b.pool.batch()
	}
	b.mu.Unlock()
}

// release sends what was written since hold in one write to the socket
// and returns its error (the connection is then broken: the TLS layer
// took the bytes as sent).
func (b *bufConn) release() error {
	b.mu.Lock()
	bt := b.batch
	b.batch = nil
	b.mu.Unlock()
	if bt == nil {
		return nil
	}
	var err error
	if len(*bt) > 0 {
		_, err = b.Conn.Write(*bt)
	}
	b.pool.putBatch(bt)
	return err
}

func (b *bufConn) Read(p []byte) (int, error) {
	if b.r != nil {
		if b.r.Buffered() > 0 {
			return b.r.Read(p)
		}
		if b.pool != nil {
			b.pool.putReader(b.r)
		}
		b.r = nil
	}
	return b.Conn.Read(p)
}
