package supervisordapi

import (
	"context"

	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// Client is a typed client for supervisord's API socket.
type Client struct{ c *rpc.Client }

// NewClient wraps an rpc client dialled to supervisord's socket.
func NewClient(c *rpc.Client) *Client { return &Client{c: c} }

// Provision provisions an instance (idempotent on req.InstanceID).
func (c *Client) Provision(ctx context.Context, req *ProvisionRequest) (*Instance, error) {
	var out Instance
	return &out, c.c.Call(ctx, OpProvision, req, &out)
}

// Status returns one instance's status.
func (c *Client) Status(ctx context.Context, id string) (*Instance, error) {
	var out Instance
	return &out, c.c.Call(ctx, OpStatus, &IDRequest{InstanceID: id}, &out)
}

// List lists every instance.
func (c *Client) List(ctx context.Context) (*ListResponse, error) {
	var out ListResponse
	return &out, c.c.Call(ctx, OpList, nil, &out)
}

// Stop stops an instance's whole process tree and returns its status.
func (c *Client) Stop(ctx context.Context, id string) (*Instance, error) {
	var out Instance
	return &out, c.c.Call(ctx, OpStop, &IDRequest{InstanceID: id}, &out)
}

// Destroy stops an instance and removes its directories.
func (c *Client) Destroy(ctx context.Context, id string) error {
	return c.c.Call(ctx, OpDestroy, &IDRequest{InstanceID: id}, nil)
}

// Signal sends sig to the instance's process group.
func (c *Client) Signal(ctx context.Context, id, sig string) error {
	return c.c.Call(ctx, OpSignal, &SignalRequest{InstanceID: id, Signal: sig}, nil)
}

// Logs returns the tail of an instance's output log. instance.logs is a
// stream op (the server closes the connection after it), so it runs on a
// connection of its own even without Follow; use FollowLogs to follow.
func (c *Client) Logs(ctx context.Context, req *LogsRequest) (*LogsResponse, error) {
	var out LogsResponse
	r := *req
	r.Follow = false
	st, err := c.c.OpenStream(ctx, OpLogs, &r, &out)
	if err != nil {
		return nil, err
	}
	st.Close()
	return &out, nil
}

// FollowLogs opens an instance.logs stream: the tail, then output as it
// arrives, then an exit frame.
func (c *Client) FollowLogs(ctx context.Context, req *LogsRequest) (*rpc.Stream, error) {
	r := *req
	r.Follow = true
	return c.c.OpenStream(ctx, OpLogs, &r, nil)
}

// Attach opens an instance.attach stream.
func (c *Client) Attach(ctx context.Context, req *AttachRequest) (*rpc.Stream, *AttachResponse, error) {
	var out AttachResponse
	st, err := c.c.OpenStream(ctx, OpAttach, req, &out)
	return st, &out, err
}

// Resize sends a resize frame on an attach stream.
func Resize(st *rpc.Stream, rows, cols uint16) error {
	return st.Send(&wire.StreamFrame{T: wire.StreamResize, Rows: rows, Cols: cols})
}
