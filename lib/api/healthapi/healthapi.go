// Package healthapi holds the `health` op every hostkit daemon serves: its
// response type and a typed call.
package healthapi

import (
	"context"

	"hostkit.dev/lib/rpc"
)

// Op is the op name.
const Op = "health"

// Response is the part of a health answer every daemon gives (fields in
// bytewise key order). Daemons add their own fields; a client that wants
// them decodes into a map or a wider struct.
type Response struct {
	Epoch    string `msgpack:"epoch"`     // 16 lowercase hex, new at every process start
	Status   string `msgpack:"status"`    // "ok"
	UptimeMS int64  `msgpack:"uptime_ms"` // milliseconds since start
	Version  string `msgpack:"version"`   // the daemon's version
}

// Get calls health on c and decodes the common fields.
func Get(ctx context.Context, c *rpc.Client) (Response, error) {
	var r Response
	err := c.Call(ctx, Op, nil, &r)
	return r, err
}

// GetAll calls health on c and returns every field the daemon sent.
func GetAll(ctx context.Context, c *rpc.Client) (map[string]any, error) {
	var m map[string]any
	err := c.Call(ctx, Op, nil, &m)
	return m, err
}
