package daemon

import (
	"context"
	"time"

	"hostkit.dev/lib/rpc"
)

// OpHealth is the op every daemon serves.
const OpHealth = "health"

// Health builds the `health` op: {status: "ok", version, uptime_ms, epoch}
// plus the fields extra returns (nil: none). Any role of the daemon may call
// it (DESIGN.md's role table).
func Health(epoch string, started time.Time, extra func(context.Context) map[string]any) rpc.Op {
	return rpc.Op{
		Name: OpHealth,
		Handler: func(ctx context.Context, _ *rpc.Call) (any, error) {
			var body map[string]any
			if extra != nil {
				body = extra(ctx)
			}
			if body == nil {
				body = map[string]any{}
			}
			body["status"] = "ok"
			body["version"] = Version
			body["uptime_ms"] = time.Since(started).Milliseconds()
			body["epoch"] = epoch
			return body, nil
		},
	}
}
