package rpc

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"go.uber.org/goleak"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// TestServeStops: after ctx is cancelled Serve returns nil promptly, even
// with an idle client connection open, and the socket file is gone.
func TestServeStops(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{})
	is.NoErr(h.client.Call(t.Context(), "health", nil, nil)) // keeps its connection open
	raw := dialRaw(t, h.path)                                // never sends anything
	_ = raw
	_, err := os.Lstat(h.path)
	is.NoErr(err)
	begin := time.Now()
	h.cancel()
	select {
	case err := <-h.done:
		is.NoErr(err)
		close(h.done)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	is.True(time.Since(begin) < time.Second) // idle connections do not hold shutdown
	_, err = os.Lstat(h.path)
	is.True(errors.Is(err, fs.ErrNotExist))
	asWire(t, NewClient(h.path, time.Second).Call(t.Context(), "health", nil, nil), wire.CodeUnavailable)
}

// TestServeWaitsForInFlight: a request being handled at shutdown still
// gets its answer.
func TestServeWaitsForInFlight(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{})
	errc := make(chan error, 1)
	go func() {
		var out slowBody
		errc <- h.client.Call(context.Background(), "test.slow", &slowBody{MS: 300}, &out)
	}()
	for h.srv.ActiveConns() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	h.cancel()
	err := <-errc
	t.Log(err)
	is.True(err == nil || wire.HasCode(err, wire.CodeRequestDeadline) || wire.HasCode(err, wire.CodeServerShuttingDown))
	is.NoErr(<-h.done)
	close(h.done)
}

func TestOnIdle(t *testing.T) {
	t.Parallel()
	newIdle := func(t *testing.T) (*harness, chan struct{}) {
		fired := make(chan struct{})
		var once sync.Once
		h := start(t, options{cfg: func(c *Config) {
			c.IdleAfter = 300 * time.Millisecond
			c.OnIdle = func() { once.Do(func() { close(fired) }) }
		}})
		return h, fired
	}
	t.Run("fires without connections", func(t *testing.T) {
		t.Parallel()
		_, fired := newIdle(t)
		select {
		case <-fired:
		case <-time.After(3 * time.Second):
			t.Fatal("OnIdle not called")
		}
	})
	t.Run("not while a peer is being authenticated", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		fired := make(chan struct{})
		var once sync.Once
		h := start(t, options{cfg: func(c *Config) {
			c.IdleAfter = 300 * time.Millisecond
			c.OnIdle = func() { once.Do(func() { close(fired) }) }
			c.Authenticate = func(sock.Peer) error {
				time.Sleep(time.Second) // hashing a large executable on a loaded machine
				return nil
			}
		}})
		c := dialRaw(t, h.path)
		sendReq(t, c, req("health"))
		is.True(readResp(t, c).OK) // answered: the daemon did not exit meanwhile
		select {
		case <-fired:
			t.Fatal("OnIdle called while a connection was open")
		default:
		}
		c.Close()
	})
	t.Run("not while a connection is open", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		h, fired := newIdle(t)
		c := dialRaw(t, h.path)
		sendReq(t, c, req("health"))
		is.True(readResp(t, c).OK)
		select {
		case <-fired:
			t.Fatal("OnIdle called while a connection was open")
		case <-time.After(time.Second):
		}
		closedAt := time.Now()
		c.Close()
		select {
		case <-fired:
			is.True(time.Since(closedAt) >= 250*time.Millisecond) // counted from the last close
		case <-time.After(3 * time.Second):
			t.Fatal("OnIdle not called after the connection closed")
		}
	})
}

// TestNoGoroutineLeak drives many connections, streams and protocol errors,
// stops the server and checks that no goroutine is left behind.
func TestNoGoroutineLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	is := is.New(t)
	dir := makeDir(t)
	path := filepath.Join(dir, "d", "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := sock.Listen(ctx, sock.Config{Path: path, Group: -1})
	is.NoErr(err)
	var counter atomic.Int64
	srv, err := NewServer(Config{Daemon: "leak", Roles: Roles{roleAdmin: {euid}}, Logger: slog.New(slog.DiscardHandler), MaxConns: 256}, testOps(&counter)...)
	is.NoErr(err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()

	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			c := NewClient(path, 5*time.Second)
			defer c.Close()
			for range 10 {
				if err := c.Call(ctx, "health", nil, nil); err != nil {
					t.Error(err)
				}
			}
			c.Call(ctx, "test.panic", nil, nil)
			c.Call(ctx, "no.such", nil, nil)
			sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
			c.Call(sctx, "test.slow", nil, nil)
			scancel()
			st, err := c.OpenStream(ctx, "test.stream", nil, nil)
			if err != nil {
				t.Error(err)
				return
			}
			st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("x")})
			st.Recv()
			if i%2 == 0 {
				st.Send(&wire.StreamFrame{T: wire.StreamDetach})
				st.Recv()
			}
			st.Close()
		})
	}
	// Frame errors and abandoned connections.
	for range 8 {
		wg.Go(func() {
			c, err := sock.Dial(ctx, path)
			if err != nil {
				t.Error(err)
				return
			}
			c.Write([]byte{0, 0, 0, 0})
			c.Close()
		})
	}
	wg.Wait()
	// A stream left open and an idle connection at shutdown.
	open := NewClient(path, 5*time.Second)
	st, err := open.OpenStream(ctx, "test.stream", nil, nil)
	is.NoErr(err)
	is.NoErr(open.Call(ctx, "health", nil, nil))
	cancel()
	is.NoErr(<-done)
	st.Close()
	open.Close()
}
