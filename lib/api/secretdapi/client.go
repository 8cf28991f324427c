package secretdapi

import (
	"context"

	"hostkit.dev/lib/rpc"
)

// Client is a typed client for secretd.
type Client struct{ c *rpc.Client }

// NewClient wraps an rpc client dialled to secretd's socket.
func NewClient(c *rpc.Client) *Client { return &Client{c: c} }

// CredentialPut stores a credential. idem is the idempotency key ("" none).
func (c *Client) CredentialPut(ctx context.Context, req *CredentialPutRequest, idem string) (*CredentialPutResponse, error) {
	var out CredentialPutResponse
	return &out, c.c.Call(ctx, OpCredentialPut, req, &out, idemOpt(idem)...)
}

// CredentialDelete deletes a stored credential.
func (c *Client) CredentialDelete(ctx context.Context, name string) error {
	return c.c.Call(ctx, OpCredentialDelete, &CredentialDeleteRequest{Name: name}, nil)
}

// CredentialList lists credential metadata.
func (c *Client) CredentialList(ctx context.Context) (*CredentialListResponse, error) {
	var out CredentialListResponse
	return &out, c.c.Call(ctx, OpCredentialList, nil, &out)
}

// LeaseStage stages a lease.
func (c *Client) LeaseStage(ctx context.Context, req *LeaseStageRequest) (*LeaseStageResponse, error) {
	var out LeaseStageResponse
	return &out, c.c.Call(ctx, OpLeaseStage, req, &out)
}

// LeaseConsume consumes handles for invocation, all or nothing.
func (c *Client) LeaseConsume(ctx context.Context, invocation string, handles [][]byte) (*LeaseConsumeResponse, error) {
	var out LeaseConsumeResponse
	return &out, c.c.Call(ctx, OpLeaseConsume, &LeaseConsumeRequest{Handles: handles, Invocation: invocation}, &out)
}

// LeaseLookup returns a lease's metadata without consuming it.
func (c *Client) LeaseLookup(ctx context.Context, handle []byte) (*LeaseMeta, error) {
	var out LeaseMeta
	return &out, c.c.Call(ctx, OpLeaseLookup, &LeaseLookupRequest{Handle: handle}, &out)
}

// LeaseRevoke revokes an invocation's unconsumed leases.
func (c *Client) LeaseRevoke(ctx context.Context, invocation string) (*LeaseRevokeResponse, error) {
	return c.LeaseRevokeOwned(ctx, invocation, "")
}

// LeaseList lists staged leases (of one invocation when set).
func (c *Client) LeaseList(ctx context.Context, invocation string) (*LeaseListResponse, error) {
	return c.LeaseListOwned(ctx, "", invocation)
}

// LeaseListOwned lists the staged leases of owner id owner and of
// invocation ("" = any, for either).
func (c *Client) LeaseListOwned(ctx context.Context, owner, invocation string) (*LeaseListResponse, error) {
	var out LeaseListResponse
	return &out, c.c.Call(ctx, OpLeaseList, &LeaseListRequest{Invocation: invocation, Owner: owner}, &out)
}

// LeaseRevokeOwned revokes invocation's unconsumed leases that were staged
// with owner id owner ("" = every owner's, as LeaseRevoke).
func (c *Client) LeaseRevokeOwned(ctx context.Context, invocation, owner string) (*LeaseRevokeResponse, error) {
	var out LeaseRevokeResponse
	return &out, c.c.Call(ctx, OpLeaseRevoke, &LeaseRevokeRequest{Invocation: invocation, Owner: owner}, &out)
}

func idemOpt(key string) []rpc.CallOption {
	if key == "" {
		return nil
	}
	return []rpc.CallOption{rpc.WithIdem(key)}
}
