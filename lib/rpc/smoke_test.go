package rpc

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/sock"
)

func TestSmokeHealth(t *testing.T) {
	is := is.New(t)
	dir, err := os.MkdirTemp("/tmp", "hk")
	is.NoErr(err)
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "d", "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := sock.Listen(ctx, sock.Config{Path: path})
	is.NoErr(err)
	srv, err := NewServer(Config{Daemon: "t", Roles: Roles{"admin": {uint32(os.Geteuid())}}, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))},
		Op{Name: "health", Handler: func(ctx context.Context, c *Call) (any, error) { return map[string]any{"status": "ok"}, nil }})
	is.NoErr(err)
	done := make(chan error)
	go func() { done <- srv.Serve(ctx, l) }()
	c := NewClient(path, 0)
	var out map[string]any
	is.NoErr(c.Call(ctx, "health", nil, &out))
	is.Equal(out["status"], "ok")
	is.NoErr(c.Call(ctx, "health", nil, &out))
	err = c.Call(ctx, "nope", nil, &out)
	t.Log(err)
	cancel()
	is.NoErr(<-done)
}
