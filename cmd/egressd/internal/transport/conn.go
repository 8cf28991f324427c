package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// maxResponseHeader caps an upstream's status line and header block, as
// net/http's MaxResponseHeaderBytes did.
const maxResponseHeader = 64 << 10

// max1xx is how many informational (1xx) answers may precede the final
// one, as in net/http.
const max1xx = 5

// aLongTimeAgo is a deadline that has passed: setting it wakes a blocked
// read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// conn is one upstream HTTP/1.1 connection. It carries one request at a
// time: the caller writes it and reads the answer on its own goroutine.
type conn struct {
	p      *pool
	nc     net.Conn        // *net.TCPConn, or *tls.Conn over one
	raw    syscall.RawConn // the socket, for the idle check (nil: none)
	lr     headerLimit     // under br
	br     *bufio.Reader
	bw     *bufio.Writer
	wrote  int64 // bytes written to nc
	idleAt time.Time
	reused bool // taken from the idle list

	peek      func(fd uintptr) bool // the idle check's callback (alive)
	peekAlive bool                  // its answer

	rdl, wdl time.Time // the deadlines set on nc (readBy, writeBy; zero: none)
}

// readBy sets the read deadline to t (zero: none), unless the one in
// force is already a little before it (moveDeadline).
func (c *conn) readBy(t time.Time) {
	if moveDeadline(c.rdl, t) {
		c.rdl = t
		_ = c.nc.SetReadDeadline(t)
	}
}

// writeBy is readBy for the write deadline.
func (c *conn) writeBy(t time.Time) {
	if moveDeadline(c.wdl, t) {
		c.wdl = t
		_ = c.nc.SetWriteDeadline(t)
	}
}

// moveDeadline reports whether a deadline cur must move to t: to clear
// it, from none, to an earlier time, or later by more than a sixteenth of
// the time left until t (at most a second). Back-to-back requests, whose
// deadlines differ by milliseconds, then set none (each set is a runtime
// timer update); a deadline falls at most that much early, and never
// late.
func moveDeadline(cur, t time.Time) bool {
	switch {
	case t.IsZero():
		return !cur.IsZero()
	case cur.IsZero() || cur.After(t):
		return true
	}
	return t.Sub(cur) > min(time.Second, time.Until(t)/16)
}

func newConn(p *pool, nc net.Conn, tcp *net.TCPConn) *conn {
	c := &conn{p: p, nc: nc}
	if tcp != nil {
		c.raw, _ = tcp.SyscallConn()
	}
	c.lr = headerLimit{r: nc, n: unlimited}
	c.br = bufio.NewReaderSize(&c.lr, 8<<10)
	c.bw = bufio.NewWriterSize(writeCounter{c}, 4<<10)
	return c
}

func (c *conn) close() { c.nc.Close() }

// writeCounter counts what reaches the connection, so that a failed write
// can tell whether any byte left.
type writeCounter struct{ c *conn }

func (w writeCounter) Write(p []byte) (int, error) {
	n, err := w.c.nc.Write(p)
	w.c.wrote += int64(n)
	return n, err
}

const unlimited = 1 << 62

// headerLimit is an io.LimitedReader that fails, instead of ending, once
// its budget is spent: a spurious EOF under the bufio.Reader would
// otherwise cut the body short after a large header.
type headerLimit struct {
	r io.Reader
	n int64
}

var errHeaderTooLarge = fmt.Errorf("transport: response header larger than %d bytes", maxResponseHeader)

func (l *headerLimit) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// attemptError is a request's failure on one connection, with what
// decides whether it may be sent again (retryable).
type attemptError struct {
	err            error
	nothingWritten bool // not one byte of the request left
	answered       bool // some byte of an answer arrived
}

func (e *attemptError) Error() string { return e.err.Error() }
func (e *attemptError) Unwrap() error { return e.err }

// unwrapAttempt returns the error inside an attemptError.
func unwrapAttempt(err error) error {
	var ae *attemptError
	if errors.As(err, &ae) {
		return ae.err
	}
	return err
}

// retryable reports whether req, which failed on a reused connection, may
// be sent again on a new one, by net/http's rules: when nothing of it was
// written and its body can be sent again; or when no answer began and it
// is replayable (GET, HEAD, OPTIONS or TRACE, or an Idempotency-Key, with
// a body that can be sent again).
func retryable(req *http.Request, err error) bool {
	var ae *attemptError
	if !errors.As(err, &ae) {
		return false
	}
	rewindable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	if ae.nothingWritten {
		return rewindable
	}
	if ae.answered || !rewindable {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, k1 := req.Header["Idempotency-Key"]
	_, k2 := req.Header["X-Idempotency-Key"]
	return k1 || k2
}

// roundTrip writes req and reads the answer's header. The body is read
// through the returned response, which gives the connection back to the
// pool at its end (body.finish). The deadlines are the context's, and
// ResponseHeaderTimeout for the header; the context's end interrupts
// either side at once.
func (c *conn) roundTrip(ctx context.Context, req *http.Request, body io.Reader) (*http.Response, error) {
	dl, _ := ctx.Deadline()
	hdr := time.Now().Add(c.p.t.cfg.ResponseHeaderTimeout)
	if !dl.IsZero() && dl.Before(hdr) {
		hdr = dl
	}
	c.writeBy(dl)
	c.readBy(hdr)
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error, ae attemptError) (*http.Response, error) {
		stop()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		ae.err = err
		return nil, &ae
	}

	before := c.wrote
	if err := writeRequest(c.bw, req, body); err != nil {
		return fail(err, attemptError{nothingWritten: c.wrote == before})
	}
	var resp *http.Response
	for n1xx := 0; ; n1xx++ {
		c.lr.n = maxResponseHeader
		r, err := http.ReadResponse(c.br, req)
		if err != nil {
			return fail(err, attemptError{answered: c.lr.n != maxResponseHeader || c.br.Buffered() > 0 || n1xx > 0})
		}
		if r.StatusCode >= 200 || r.StatusCode < 100 {
			resp = r
			break
		}
		if r.StatusCode == http.StatusSwitchingProtocols {
			return fail(errors.New("transport: upstream switched protocols"), attemptError{answered: true})
		}
		if n1xx >= max1xx {
			return fail(errors.New("transport: too many 1xx responses"), attemptError{answered: true})
		}
	}
	c.lr.n = unlimited
	if resp.ContentLength < 0 || int64(c.br.Buffered()) < resp.ContentLength {
		// The body is still to come: the context's deadline, not the
		// header's, bounds it. (A small body came with the header, and no
		// more is read from nc for it: the deadline is left alone.)
		c.readBy(dl)
	}
	resp.Body = &respBody{c: c, rc: resp.Body, stop: stop, reuse: !resp.Close && !req.Close}
	return resp, nil
}

// respBody is an answer's body: at its end (EOF) the connection goes back
// to the pool, unless the answer or request closes it, bytes follow the
// body, or the context's end already poisoned its deadlines; closed
// before its end, the connection is closed.
type respBody struct {
	c     *conn
	rc    io.ReadCloser
	stop  func() bool
	reuse bool
	done  bool
}

func (b *respBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.finish(true)
	} else if err != nil {
		b.finish(false)
	}
	return n, err
}

func (b *respBody) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

func (b *respBody) finish(complete bool) {
	b.done = true
	if b.stop() && complete && b.reuse && b.c.br.Buffered() == 0 {
		b.c.p.put(b.c)
		return
	}
	b.c.close()
}
