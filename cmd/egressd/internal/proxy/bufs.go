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

// bufPools pools the readers and writers of a Server's connections.
type bufPools struct {
	readers, writers sync.Pool
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
type bufConn struct {
	net.Conn
	r    *bufio.Reader // nil once drained
	pool *bufPools     // where r goes then (nil: nowhere)
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
