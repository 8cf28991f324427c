package manager

import (
	"context"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/rpc"
)

// Ops returns supervisord's instance ops (admin role).
func (m *Manager) Ops() []rpc.Op {
	admin := []rpc.Role{api.RoleAdmin}
	return []rpc.Op{
		{Name: api.OpProvision, Roles: admin, Handler: rpc.Handle(func(ctx context.Context, _ *rpc.Call, req *api.ProvisionRequest) (*api.Instance, error) {
			return m.Provision(ctx, req)
		})},
		{Name: api.OpStatus, Roles: admin, Handler: rpc.Handle(func(ctx context.Context, _ *rpc.Call, req *api.IDRequest) (*api.Instance, error) {
			return m.Status(ctx, req.InstanceID)
		})},
		{Name: api.OpList, Roles: admin, Handler: rpc.Handle(func(ctx context.Context, _ *rpc.Call, _ *struct{}) (*api.ListResponse, error) {
			return m.List(ctx)
		})},
		{Name: api.OpStop, Roles: admin, Handler: rpc.Handle(func(ctx context.Context, _ *rpc.Call, req *api.IDRequest) (*api.Instance, error) {
			return m.Stop(ctx, req.InstanceID)
		})},
		{Name: api.OpDestroy, Roles: admin, Handler: rpc.Handle(func(ctx context.Context, _ *rpc.Call, req *api.IDRequest) (*api.DestroyResponse, error) {
			return &api.DestroyResponse{InstanceID: req.InstanceID}, m.Destroy(ctx, req.InstanceID)
		})},
		{Name: api.OpSignal, Roles: admin, Handler: rpc.Handle(func(ctx context.Context, _ *rpc.Call, req *api.SignalRequest) (struct{}, error) {
			return struct{}{}, m.Signal(ctx, req.InstanceID, req.Signal)
		})},
		{Name: api.OpLogs, Roles: admin, Handler: rpc.Handle(func(ctx context.Context, _ *rpc.Call, req *api.LogsRequest) (*api.LogsResponse, error) {
			return m.Logs(ctx, req)
		}), Stream: m.FollowLogs},
		{Name: api.OpAttach, Roles: admin, Handler: rpc.Handle(m.OpenAttach), Stream: m.AttachStream},
	}
}
