package daemon

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

func TestHealthHandler(t *testing.T) {
	t.Parallel()
	const epoch = "00112233445566ff"
	started := time.Now().Add(-2 * time.Second)
	tests := []struct {
		name     string
		body     any // request body, marshalled canonically; nil = absent
		extra    func(context.Context) map[string]any
		wantCode string
		want     map[string]any // extra fields expected besides the common ones
	}{
		{name: "no body"},
		{name: "empty map body", body: map[string]any{}},
		{
			name:  "extra fields",
			extra: func(context.Context) map[string]any { return map[string]any{"bundles": 2, "mode": "same-user"} },
			want:  map[string]any{"bundles": 2, "mode": "same-user"},
		},
		{
			name:  "extra returns nil",
			extra: func(context.Context) map[string]any { return nil },
		},
		{
			name: "extra cannot override common fields",
			extra: func(context.Context) map[string]any {
				return map[string]any{"status": "bad", "epoch": "x", "version": "0"}
			},
		},
		{
			name:     "unknown field",
			body:     map[string]any{"verbose": true},
			wantCode: wire.CodeRequestUnknownField,
		},
		{
			name: "a struct body with a field",
			body: struct {
				A string `msgpack:"a"`
			}{A: "x"},
			wantCode: wire.CodeRequestUnknownField,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			op := Health(epoch, started, tt.extra)
			is.Equal(op.Name, OpHealth)
			is.Equal(len(op.Roles), 0) // any role of the daemon
			body, err := wire.Marshal(tt.body)
			is.NoErr(err)
			out, err := op.Handler(context.Background(), &rpc.Call{Op: OpHealth, Body: body})
			if tt.wantCode != "" {
				is.Equal(wire.CodeOf(err), tt.wantCode)
				return
			}
			is.NoErr(err)
			m := out.(map[string]any)
			is.Equal(m["status"], "ok")
			is.Equal(m["version"], Version)
			is.Equal(m["epoch"], epoch)
			up := m["uptime_ms"].(int64)
			is.True(up >= 2000 && up < 60_000)
			is.Equal(len(m), 4+len(tt.want))
			for k, v := range tt.want {
				is.Equal(m[k], v)
			}
			_, err = wire.Marshal(m) // the answer encodes canonically
			is.NoErr(err)
		})
	}
}

// TestHealthExtraShared: extra may return a map it keeps (a snapshot it
// updates elsewhere); concurrent health calls neither modify it nor race on
// it (go test -race).
func TestHealthExtraShared(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	shared := map[string]any{"bundles": 1}
	op := Health("00112233445566ff", time.Now(), func(context.Context) map[string]any { return shared })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := op.Handler(context.Background(), &rpc.Call{Op: OpHealth}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	is.Equal(shared, map[string]any{"bundles": 1}) // untouched
}
