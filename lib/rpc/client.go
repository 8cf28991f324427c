package rpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// DefaultTimeout bounds a call whose context has no deadline.
const DefaultTimeout = 10 * time.Second

// Client calls ops on one daemon socket. It keeps one connection and sends
// one request at a time on it (calls are serialized); a broken connection
// is redialled on the next call. Safe for concurrent use.
type Client struct {
	path     string
	timeout  time.Duration
	maxFrame int
	mu       sync.Mutex
	conn     *net.UnixConn
	br       *bufio.Reader // reads conn
	lastUse  time.Time
	buf      []byte // the request frame being sent
}

// reuseWindow is how long an idle connection is reused; it is well under
// the server's default idle timeout, so a reused connection is not one the
// server is about to close.
const reuseWindow = 20 * time.Second

// NewClient returns a client for the socket at path. timeout <= 0 means
// DefaultTimeout. Nothing is dialled until the first call.
func NewClient(path string, timeout time.Duration) *Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{path: path, timeout: timeout, maxFrame: wire.DefaultMaxFrame}
}

// Path returns the socket path.
func (c *Client) Path() string { return c.path }

// CallOption adjusts one call.
type CallOption func(*wire.Request)

// WithIdem sets the request's idempotency key (at most 64 bytes).
func WithIdem(key string) CallOption { return func(r *wire.Request) { r.Idem = key } }

// Call sends op with body req (a struct with msgpack tags, a map, or nil)
// and decodes the answer's body into resp (a pointer, or nil to discard).
// The request deadline is ctx's deadline or now+timeout, whichever is
// sooner; the correlation id comes from ctx (WithCorr). Errors are
// *wire.Error: the server's code; daemon.unavailable (retry safe) when the
// socket cannot be dialled; connection.closed (retry after_observe) when the
// connection broke after the request was sent; request.deadline_exceeded
// when ctx ended first; response.malformed / response.id_mismatch for a
// bad answer.
func (c *Client) Call(ctx context.Context, op string, req, resp any, opts ...CallOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, r, err := c.send(ctx, op, req, opts)
	if err != nil {
		return err
	}
	ans, err := c.receive(ctx, conn, r)
	if err != nil {
		return err
	}
	if resp != nil {
		if err := wire.Unmarshal(ans.Body, resp, false); err != nil {
			return wire.Wrap(wire.CodeResponseMalformed, "response body does not match "+op, err)
		}
	}
	return nil
}

// OpenStream sends a stream op and, once the server accepts it, returns the
// stream on a connection of its own (the client's shared connection is not
// used). The accepting body is decoded into resp. When the op is refused,
// that connection is closed with the refusal: it serves nothing else, and
// the server would otherwise hold it until its idle timeout.
func (c *Client) OpenStream(ctx context.Context, op string, req, resp any) (*Stream, error) {
	sc := &Client{path: c.path, timeout: c.timeout, maxFrame: c.maxFrame}
	conn, r, err := sc.send(ctx, op, req, nil)
	if err != nil {
		sc.drop()
		return nil, err
	}
	ans, err := sc.receive(ctx, conn, r)
	if err != nil {
		sc.drop()
		return nil, err
	}
	if resp != nil {
		if err := wire.Unmarshal(ans.Body, resp, false); err != nil {
			conn.Close()
			return nil, wire.Wrap(wire.CodeResponseMalformed, "response body does not match "+op, err)
		}
	}
	conn.SetDeadline(time.Time{})
	return newStream(conn, sc.br, c.maxFrame), nil
}

// Pending is an Upload op (Op.Upload) sent and not yet answered
// (StartStream): the caller sends its frames on Stream while the server
// works, and reads the answer with Answer.
type Pending struct {
	st *Stream
	sc *Client
	r  *wire.Request
	op string
}

// StartStream sends an Upload op's request on a connection of its own
// and returns at once, before the answer: the caller sends its frames
// (Pending.Stream, whose Send is safe to call while Answer waits) and
// reads the answer with Pending.Answer. The request's deadline (ctx's or
// the client's timeout) bounds the connection's reads and writes until
// Answer returns, so it bounds the frames sent before the answer too.
// Errors: Call's before the request was sent.
func (c *Client) StartStream(ctx context.Context, op string, req any) (*Pending, error) {
	sc := &Client{path: c.path, timeout: c.timeout, maxFrame: c.maxFrame}
	conn, r, err := sc.send(ctx, op, req, nil)
	if err != nil {
		sc.drop()
		return nil, err
	}
	return &Pending{st: newStream(conn, sc.br, c.maxFrame), sc: sc, r: r, op: op}, nil
}

// Stream returns the stream the caller sends its frames on, and reads
// the server's frames from once Answer accepted.
func (p *Pending) Stream() *Stream { return p.st }

// Answer waits for the answer (ctx ends the wait early) and decodes an
// accepting body into resp (nil: discarded). On a refusal or a failure
// the connection is closed, so a Send under way fails, and the error is
// Call's (the server's code, connection.closed, request.deadline_exceeded,
// response.malformed). Once accepted, the connection's deadlines are
// cleared and the stream carries frames both ways.
func (p *Pending) Answer(ctx context.Context, resp any) error {
	ans, err := p.sc.receive(ctx, p.st.conn.(*net.UnixConn), p.r)
	if err == nil && resp != nil {
		if uerr := wire.Unmarshal(ans.Body, resp, false); uerr != nil {
			err = wire.Wrap(wire.CodeResponseMalformed, "response body does not match "+p.op, uerr)
		}
	}
	if err != nil {
		p.st.conn.Close()
		return err
	}
	p.st.conn.SetDeadline(time.Time{})
	return nil
}

func (c *Client) send(ctx context.Context, op string, req any, opts []CallOption) (*net.UnixConn, *wire.Request, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, &wire.Error{Code: wire.CodeRequestDeadline, Msg: "call ended before it was sent", Retry: wire.RetrySafe, Err: err}
	}
	body, err := wire.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	id := make([]byte, wire.IDLen)
	if _, err := rand.Read(id); err != nil {
		return nil, nil, wire.Wrap(wire.CodeInternal, "no randomness for a request id", err)
	}
	r := &wire.Request{ID: id, Op: op, Deadline: deadline.UnixMilli(), Corr: CorrFrom(ctx), Body: body}
	for _, o := range opts {
		o(r)
	}
	frame, err := finishFrame(wire.AppendRequest(beginFrame(c.buf), r), c.maxFrame)
	if err != nil {
		return nil, nil, err
	}
	defer func() { c.buf = keepBuf(frame) }()
	if c.conn != nil && time.Since(c.lastUse) > reuseWindow {
		c.drop()
	}
	c.lastUse = time.Now()
	for attempt := 0; attempt < 2; attempt++ {
		fresh := c.conn == nil
		if fresh {
			conn, err := sock.Dial(ctx, c.path)
			if err != nil {
				return nil, nil, &wire.Error{Code: wire.CodeUnavailable, Msg: "daemon socket is not reachable: " + c.path, Retry: wire.RetrySafe, Err: err}
			}
			c.conn = conn
			if c.br == nil {
				c.br = bufio.NewReaderSize(conn, connBufSize)
			} else {
				c.br.Reset(conn)
			}
			attempt = 1 // a fresh connection gets no second try
		}
		c.conn.SetDeadline(deadline)
		if _, err = c.conn.Write(frame); err == nil {
			return c.conn, r, nil
		}
		if fresh {
			// A server that refuses a connection (server.busy) answers
			// and closes before reading: report its answer, not EPIPE.
			if rerr := refusal(c.conn, c.br); rerr != nil {
				c.drop()
				return nil, nil, rerr
			}
		}
		c.drop()
	}
	return nil, nil, &wire.Error{Code: wire.CodeConnectionClosed, Msg: "could not send the request", Retry: wire.RetrySafe, Err: err}
}

// refusal returns the error of a refusal answer (an error with an empty id)
// already waiting on conn, or nil.
func refusal(conn *net.UnixConn, br *bufio.Reader) error {
	conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	p, err := readFrame(br, 0)
	if err != nil {
		return nil
	}
	ans, err := wire.DecodeResponse(p, wire.Limits{})
	if err != nil || ans.OK || ans.Err == nil || len(ans.ID) != 0 {
		return nil
	}
	return ans.Err.ToError()
}

func (c *Client) receive(ctx context.Context, conn *net.UnixConn, r *wire.Request) (*wire.Response, error) {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
		defer stop()
	}
	payload, err := readFrame(c.br, c.maxFrame)
	if err != nil {
		c.drop()
		if ctx.Err() != nil {
			return nil, &wire.Error{Code: wire.CodeRequestDeadline, Msg: "call ended before the answer", Retry: wire.RetryAfterObserve, Err: ctx.Err()}
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, &wire.Error{Code: wire.CodeRequestDeadline, Msg: "no answer before the deadline", Retry: wire.RetryAfterObserve, Err: err}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || wire.HasCode(err, wire.CodeFrameTruncated) {
			return nil, &wire.Error{Code: wire.CodeConnectionClosed, Msg: "connection closed before the answer", Retry: wire.RetryAfterObserve, Err: err}
		}
		return nil, &wire.Error{Code: wire.CodeResponseMalformed, Msg: "answer could not be read", Retry: wire.RetryAfterObserve, Err: err}
	}
	ans, err := wire.DecodeResponse(payload, wire.Limits{})
	if err != nil {
		c.drop()
		return nil, wire.Wrap(wire.CodeResponseMalformed, "answer is not a valid response", err)
	}
	if !ans.OK {
		if ans.Err == nil {
			return nil, wire.Errorf(wire.CodeResponseMalformed, "failed answer without err")
		}
		if len(ans.ID) == 0 {
			c.drop() // the server could not read our request: the connection is done
			return nil, ans.Err.ToError()
		}
		if !bytes.Equal(ans.ID, r.ID) {
			c.drop()
			return nil, wire.Errorf(wire.CodeResponseMismatch, "answer is for another request")
		}
		if ans.Err.Code == wire.CodePeerDenied {
			// A server whose Authenticate refused the peer closes the
			// connection after this answer: a next call on it could be
			// written before that close and be lost with it.
			c.drop()
		}
		return nil, ans.Err.ToError()
	}
	if !bytes.Equal(ans.ID, r.ID) {
		c.drop()
		return nil, wire.Errorf(wire.CodeResponseMismatch, "answer is for another request")
	}
	return ans, nil
}

func (c *Client) drop() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}

// Close closes the client's connection. The client may be used again.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drop()
	return nil
}
