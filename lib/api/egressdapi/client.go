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
	return c.c.Call(ctx, OpBundleDrop, &BundleDropRequest{Invocation: invocation}, nil)
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

// Stats returns accounting for one invocation ("" = every bundle).
func (c *Client) Stats(ctx context.Context, invocation string) (*StatsResponse, error) {
	var out StatsResponse
	return &out, c.c.Call(ctx, OpEgressStats, &StatsRequest{Invocation: invocation}, &out)
}
