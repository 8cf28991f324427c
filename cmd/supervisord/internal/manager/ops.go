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
		{Name: api.OpProvision, Roles: admin, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req api.ProvisionRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return m.Provision(ctx, &req)
		}},
		{Name: api.OpStatus, Roles: admin, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req api.IDRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return m.Status(ctx, req.InstanceID)
		}},
		{Name: api.OpList, Roles: admin, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req struct{}
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return m.List(ctx)
		}},
		{Name: api.OpStop, Roles: admin, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req api.IDRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return m.Stop(ctx, req.InstanceID)
		}},
		{Name: api.OpDestroy, Roles: admin, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req api.IDRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return &api.DestroyResponse{InstanceID: req.InstanceID}, m.Destroy(ctx, req.InstanceID)
		}},
		{Name: api.OpSignal, Roles: admin, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req api.SignalRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return struct{}{}, m.Signal(ctx, req.InstanceID, req.Signal)
		}},
		{Name: api.OpLogs, Roles: admin, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req api.LogsRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return m.Logs(ctx, &req)
		}, Stream: func(ctx context.Context, call *rpc.Call, st *rpc.Stream) error {
			return m.FollowLogs(ctx, call, st)
		}},
		{Name: api.OpAttach, Roles: admin, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req api.AttachRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			return m.OpenAttach(ctx, call, &req)
		}, Stream: m.AttachStream},
	}
}
