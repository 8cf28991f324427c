package daemon

import (
	"context"
	"maps"
	"time"

	"hostkit.dev/lib/rpc"
)

// OpHealth is the op every daemon serves.
const OpHealth = "health"

// Health builds the `health` op: {status: "ok", version, uptime_ms, epoch}
// plus the fields extra returns (nil: none; its map is copied, never
// modified, and the common fields win over its keys). The request body must
// be empty: any field is request.unknown_field. Any role of the daemon may
// call it (docs/design.md, "Peers and roles").
func Health(epoch string, started time.Time, extra func(context.Context) map[string]any) rpc.Op {
	return rpc.Op{
		Name: OpHealth,
		Handler: rpc.Handle(func(ctx context.Context, _ *rpc.Call, _ *struct{}) (map[string]any, error) {
			body := map[string]any{}
			if extra != nil {
				maps.Copy(body, extra(ctx))
			}
			body["status"] = "ok"
			body["version"] = Version
			body["uptime_ms"] = time.Since(started).Milliseconds()
			body["epoch"] = epoch
			return body, nil
		}),
	}
}
