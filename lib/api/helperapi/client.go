package helperapi

import (
	"context"

	"hostkit.dev/lib/rpc"
)

// Client is a typed client for the helper's socket. Mutations take the
// idempotency key the op requires; a repeat with the same key and body
// gets the same answer, with another body request.idempotency_conflict.
type Client struct{ c *rpc.Client }

// NewClient wraps an rpc client dialled to the helper's socket
// (<run>/helper/api.sock).
func NewClient(c *rpc.Client) *Client { return &Client{c: c} }

// RPC returns the underlying rpc client (e.g. to close it, or for a
// benchmark's raw calls).
func (c *Client) RPC() *rpc.Client { return c.c }

// Health calls health.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var out Health
	return &out, c.c.Call(ctx, OpHealth, nil, &out)
}

// Negotiate calls runtime.negotiate; req may be nil.
func (c *Client) Negotiate(ctx context.Context, req *NegotiateRequest) (*NegotiateResponse, error) {
	var out NegotiateResponse
	if req == nil {
		return &out, c.c.Call(ctx, OpNegotiate, nil, &out) // a typed nil would encode as msgpack nil
	}
	return &out, c.c.Call(ctx, OpNegotiate, req, &out)
}

// Observe lists the owned and foreign containers in the helper's root.
func (c *Client) Observe(ctx context.Context) (*ObserveResponse, error) {
	var out ObserveResponse
	return &out, c.c.Call(ctx, OpObserve, nil, &out)
}

// Evidence verifies an image layout's manifest and every blob it names.
func (c *Client) Evidence(ctx context.Context, img ImageRef) (*Evidence, error) {
	var out Evidence
	return &out, c.c.Call(ctx, OpEvidence, &img, &out)
}

// Usage reads one resource-usage sample of an owned container.
func (c *Client) Usage(ctx context.Context, id string) (*Usage, error) {
	var out Usage
	return &out, c.c.Call(ctx, OpUsage, &IDRequest{ContainerID: id}, &out)
}

// Logs returns the tail of an owned container's console log.
func (c *Client) Logs(ctx context.Context, req *LogsRequest) (*LogsResponse, error) {
	var out LogsResponse
	return &out, c.c.Call(ctx, OpLogs, req, &out)
}

// Plan confirms a mutation and returns its plan hash.
func (c *Client) Plan(ctx context.Context, req *PlanRequest) (*PlanResponse, error) {
	var out PlanResponse
	return &out, c.c.Call(ctx, OpPlan, req, &out)
}

// Create carries out a create plan: the image is verified again and
// unpacked into a bundle, and the container is created (status created).
func (c *Client) Create(ctx context.Context, idem string, req *MutationRequest) (*Container, error) {
	return c.mutate(ctx, OpCreate, idem, req)
}

// Start carries out a start plan.
func (c *Client) Start(ctx context.Context, idem string, req *MutationRequest) (*Container, error) {
	return c.mutate(ctx, OpStart, idem, req)
}

// Restart carries out a restart plan: stop (SIGTERM, then SIGKILL after
// the plan's stop timeout; a paused container gets SIGKILL at once),
// delete, create from the same bundle, start.
func (c *Client) Restart(ctx context.Context, idem string, req *MutationRequest) (*Container, error) {
	return c.mutate(ctx, OpRestart, idem, req)
}

// Delete carries out a delete plan.
func (c *Client) Delete(ctx context.Context, idem string, req *MutationRequest) (*DeleteResponse, error) {
	var out DeleteResponse
	return &out, c.c.Call(ctx, OpDelete, req, &out, rpc.WithIdem(idem))
}

// Cancel cancels this peer user's in-flight op with the given request id
// or correlation id.
func (c *Client) Cancel(ctx context.Context, req *CancelRequest) (*CancelResponse, error) {
	var out CancelResponse
	return &out, c.c.Call(ctx, OpCancel, req, &out)
}

func (c *Client) mutate(ctx context.Context, op, idem string, req *MutationRequest) (*Container, error) {
	var out Container
	return &out, c.c.Call(ctx, op, req, &out, rpc.WithIdem(idem))
}
