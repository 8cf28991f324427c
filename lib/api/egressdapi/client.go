package egressdapi

import (
	"context"
	"io"
	"sync"

	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// Client is a typed client for egressd's API socket.
type Client struct{ c *rpc.Client }

// NewClient wraps an rpc client dialled to egressd's socket.
func NewClient(c *rpc.Client) *Client { return &Client{c: c} }

// BundleRegister registers an invocation's bundle and returns egressd's
// epoch.
func (c *Client) BundleRegister(ctx context.Context, req *BundleRegisterRequest) (*BundleRegisterResponse, error) {
	var out BundleRegisterResponse
	return &out, c.c.Call(ctx, OpBundleRegister, req, &out)
}

// BundleDrop drops an invocation's bundle.
func (c *Client) BundleDrop(ctx context.Context, invocation string) error {
	return c.BundleDropOwned(ctx, invocation, "")
}

// BundleDropOwned drops invocation's bundle only if it carries owner id
// owner ("" = whatever its owner, as BundleDrop). Errors:
// bundle.unknown_invocation, bundle.owner_mismatch.
func (c *Client) BundleDropOwned(ctx context.Context, invocation, owner string) error {
	return c.c.Call(ctx, OpBundleDrop, &BundleDropRequest{Invocation: invocation, Owner: owner}, nil)
}

// BundleList lists the bundles of owner id owner and of invocation ("" =
// any, for either).
func (c *Client) BundleList(ctx context.Context, owner, invocation string) (*BundleListResponse, error) {
	var out BundleListResponse
	return &out, c.c.Call(ctx, OpBundleList, &BundleListRequest{Invocation: invocation, Owner: owner}, &out)
}

// Info returns the epoch, proxy address and socket, and CA bundle path.
func (c *Client) Info(ctx context.Context) (*InfoResponse, error) {
	var out InfoResponse
	return &out, c.c.Call(ctx, OpEgressInfo, nil, &out)
}

// Request sends one mediated HTTP request.
func (c *Client) Request(ctx context.Context, req *RequestRequest) (*RequestResponse, error) {
	var out RequestResponse
	return &out, c.c.Call(ctx, OpEgressRequest, req, &out)
}

// RequestStream sends one mediated HTTP request, as Request does, and
// returns the answer as soon as its header has arrived: the body is read
// from the returned stream as egressd passes it on. ctx (its deadline)
// bounds the time to that header only, not the stream's life; the caller
// must Close the stream, which ends the upstream request if the body has
// not ended. Errors are Request's (the same codes, from the same checks),
// and an answer egressd could not start (egress.upstream_error, ...).
func (c *Client) RequestStream(ctx context.Context, req *RequestRequest) (*ResponseStream, error) {
	var acc RequestStreamResponse
	st, err := c.c.OpenStream(ctx, OpEgressRequestStream, req, &acc)
	if err != nil {
		return nil, err
	}
	return &ResponseStream{Status: acc.Status, Headers: acc.Headers, st: st}, nil
}

// RequestUpload sends one mediated HTTP request whose body is read from
// body as egressd sends it upstream (egress.request_upload; req.Body must
// be empty), and returns the answer as RequestStream does. The body goes
// in data frames of at most StreamDataMax bytes, on a goroutine of
// RequestUpload's, then eof once body returns io.EOF; a body that fails
// instead (any other error) ends the exchange without eof, so the
// upstream never gets a request that looks complete, and RequestUpload
// returns it (request.invalid, wrapping it; after the answer was
// accepted, ResponseStream.Read does). ctx (its deadline) bounds the body's upload and the
// wait for the answer's header. The caller keeps body (it is not
// closed); when the answer comes before the body has been read to its
// end, the rest keeps going up until it ends or the stream is closed,
// and a Read of body under way when the stream is closed is left to
// return (the goroutine ends then). Errors are RequestStream's, and
// egress.secret_in_request, egress.placeholder_misuse or
// egress.manual_credential_rejected for a body the outbound scan refused
// (before the answer's header; after it, ResponseStream.Read returns
// them), egress.timeout for a body that stopped coming for egressd's
// -idle-timeout, egress.too_large and server.busy for a body egressd
// reads whole (a credential placed in the body).
func (c *Client) RequestUpload(ctx context.Context, req *RequestRequest, body io.Reader) (*ResponseStream, error) {
	p, err := c.c.StartStream(ctx, OpEgressRequestUpload, req)
	if err != nil {
		return nil, err
	}
	st := p.Stream()
	up := &bodySender{st: st}
	go up.send(body)
	var acc RequestStreamResponse
	if err := p.Answer(ctx, &acc); err != nil {
		if berr := up.failed(); berr != nil {
			return nil, berr // the caller's body failed: that ended it
		}
		return nil, err
	}
	return &ResponseStream{Status: acc.Status, Headers: acc.Headers, st: st, body: up}, nil
}

// bodySender sends a request body on an upload's stream.
type bodySender struct {
	st  *rpc.Stream
	mu  sync.Mutex
	err error // the body reader's failure
}

// send sends body in data frames, then eof. A body whose Read fails is
// ended with detach instead (never eof), its error kept first: the
// answer that detach brings is then known to be the body's doing.
func (b *bodySender) send(body io.Reader) {
	buf := make([]byte, StreamDataMax)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if b.st.Send(&wire.StreamFrame{T: wire.StreamData, B: buf[:n]}) != nil {
				return // the stream ended: its reader says why
			}
		}
		switch {
		case err == io.EOF:
			_ = b.st.Send(&wire.StreamFrame{T: wire.StreamEOF})
			return
		case err != nil:
			b.mu.Lock()
			b.err = &wire.Error{Code: wire.CodeRequestInvalid, Msg: "the request body could not be read", Retry: wire.RetryAfterObserve, Err: err}
			b.mu.Unlock()
			_ = b.st.Send(&wire.StreamFrame{T: wire.StreamDetach})
			return
		}
	}
}

// failed returns the body reader's failure (nil: none).
func (b *bodySender) failed() error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Stats returns accounting for one invocation ("" = every bundle).
func (c *Client) Stats(ctx context.Context, invocation string) (*StatsResponse, error) {
	var out StatsResponse
	return &out, c.c.Call(ctx, OpEgressStats, &StatsRequest{Invocation: invocation}, &out)
}
