package egressdapi

import (
	"context"

	"hostkit.dev/lib/rpc"
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

// Stats returns accounting for one invocation ("" = every bundle).
func (c *Client) Stats(ctx context.Context, invocation string) (*StatsResponse, error) {
	var out StatsResponse
	return &out, c.c.Call(ctx, OpEgressStats, &StatsRequest{Invocation: invocation}, &out)
}
