package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestStream(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	open := func(t *testing.T) *Stream {
		t.Helper()
		is := is.New(t)
		var acc map[string]any
		st, err := h.client.OpenStream(t.Context(), "test.stream", nil, &acc)
		is.NoErr(err)
		is.Equal(acc["accepted"], true)
		st.Conn().SetDeadline(time.Now().Add(5 * time.Second))
		t.Cleanup(func() { st.Close() })
		return st
	}
	t.Run("echo then detach", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		st := open(t)
		for _, msg := range []string{"a", "hello", string(make([]byte, 64<<10))} {
			is.NoErr(st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte(msg)}))
			f, err := st.Recv()
			is.NoErr(err)
			is.Equal(f.T, wire.StreamData)
			is.Equal(string(f.B), msg)
		}
		is.NoErr(st.Send(&wire.StreamFrame{T: wire.StreamDetach}))
		_, err := st.Recv()
		is.True(errors.Is(err, io.EOF)) // the server ended the stream
	})
	tests := []struct {
		name, data, code, msg string
	}{
		{"coded error", "fail", "test.failed", "the stream failed"},
		{"uncoded error", "boom", wire.CodeInternal, "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			st := open(t)
			is.NoErr(st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte(tt.data)}))
			f, err := st.Recv()
			is.NoErr(err)
			is.Equal(f.T, wire.StreamError)
			is.Equal(f.Code, tt.code)
			is.Equal(f.Msg, tt.msg)
			is.True(f.Ends())
			_, err = st.Recv()
			is.True(errors.Is(err, io.EOF))
		})
	}
	t.Run("stream op refused", func(t *testing.T) {
		t.Parallel()
		_, err := h.client.OpenStream(t.Context(), "test.ops", nil, nil)
		asWire(t, err, wire.CodePeerDenied)
	})
}

// TestStreamEndsAtShutdown: a stream whose StreamFunc waits in Recv ends
// promptly with server.shutting_down when the server stops.
func TestStreamEndsAtShutdown(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{})
	st, err := h.client.OpenStream(t.Context(), "test.stream", nil, nil)
	is.NoErr(err)
	defer st.Close()
	st.Conn().SetDeadline(time.Now().Add(5 * time.Second))
	is.NoErr(st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("x")}))
	_, err = st.Recv()
	is.NoErr(err)
	begin := time.Now()
	h.stop(t)
	is.True(time.Since(begin) < time.Second)
	f, err := st.Recv()
	is.NoErr(err)
	is.Equal(f.T, wire.StreamError)
	is.Equal(f.Code, wire.CodeServerShuttingDown)
}

// TestStreamOutlivesItsClient: a stream is on a connection of its own,
// so closing the client that opened it (as a caller that only wanted the
// stream does at once) leaves the stream working, whether or not the
// client holds a shared connection.
func TestStreamOutlivesItsClient(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	for _, called := range []bool{false, true} {
		t.Run(fmt.Sprintf("client called first: %v", called), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			c := NewClient(h.path, 5*time.Second)
			if called {
				is.NoErr(c.Call(t.Context(), "health", nil, nil))
			}
			st, err := c.OpenStream(t.Context(), "test.stream", nil, nil)
			is.NoErr(err)
			defer st.Close()
			is.NoErr(c.Close())
			st.Conn().SetDeadline(time.Now().Add(5 * time.Second))
			for i := 0; i < 3; i++ {
				is.NoErr(st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("after close")}))
				f, err := st.Recv()
				is.NoErr(err)
				is.Equal(string(f.B), "after close")
			}
		})
	}
}

// TestStreamKeep: what a Handler keeps reaches its StreamFunc; when the
// stream does not start (the Handler fails after Keep, panics, or the
// peer is gone before the accepting answer is written) it is released
// once, and never when the StreamFunc ran.
func TestStreamKeep(t *testing.T) {
	t.Parallel()
	released := make(chan string, 8)
	entered, proceed := make(chan struct{}), make(chan struct{})
	keep := Op{Name: "test.keep", Roles: []Role{roleAdmin}, Handler: func(_ context.Context, c *Call) (any, error) {
		var b echoBody
		if err := c.Decode(&b); err != nil {
			return nil, err
		}
		c.Keep(b.Msg, func(v any) { released <- v.(string) })
		switch b.Msg {
		case "fail":
			return nil, wire.Errorf("test.failed", "refused after keeping")
		case "panic":
			panic("after keeping")
		case "gone":
			close(entered)
			<-proceed
		}
		return map[string]any{"accepted": true}, nil
	}, Stream: func(_ context.Context, c *Call, st *Stream) error {
		return st.Send(&wire.StreamFrame{T: wire.StreamData, B: []byte(c.Kept().(string))})
	}}
	h := start(t, options{ops: []Op{keep}})

	t.Run("kept reaches the stream", func(t *testing.T) {
		is := is.New(t)
		st, err := h.client.OpenStream(t.Context(), "test.keep", &echoBody{Msg: "ok"}, nil)
		is.NoErr(err)
		defer st.Close()
		st.Conn().SetDeadline(time.Now().Add(5 * time.Second))
		f, err := st.Recv()
		is.NoErr(err)
		is.Equal(string(f.B), "ok")
		_, err = st.Recv()
		is.True(errors.Is(err, io.EOF))
	})
	tests := []struct {
		name, text, code string
	}{
		{"handler fails", "fail", "test.failed"},
		{"handler panics", "panic", wire.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			_, err := h.client.OpenStream(t.Context(), "test.keep", &echoBody{Msg: tt.text}, nil)
			asWire(t, err, tt.code)
			is.Equal(waitReleased(t, released), tt.text)
		})
	}
	t.Run("peer gone before the answer", func(t *testing.T) {
		is := is.New(t)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := h.client.OpenStream(ctx, "test.keep", &echoBody{Msg: "gone"}, nil)
			done <- err
		}()
		<-entered
		cancel() // the client closes its connection
		is.True(<-done != nil)
		close(proceed) // the accepting answer now meets a closed connection
		is.Equal(waitReleased(t, released), "gone")
	})
	select {
	case v := <-released:
		t.Errorf("released %q more than once, or after its stream ran", v)
	default:
	}
}

func waitReleased(t *testing.T, released <-chan string) string {
	t.Helper()
	select {
	case v := <-released:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing was released")
		return ""
	}
}

// TestStreamRefusedClosesConn: a refused stream op leaves no connection
// open on either side (the client's is its own and serves nothing else).
func TestStreamRefusedClosesConn(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{})
	st, err := h.client.OpenStream(t.Context(), "test.stream", nil, nil)
	is.NoErr(err) // one accepted stream stays open
	defer st.Close()
	for _, op := range []string{"test.ops", "no.such"} {
		_, err := h.client.OpenStream(t.Context(), op, nil, nil)
		is.True(err != nil)
	}
	for deadline := time.Now().Add(5 * time.Second); h.srv.ActiveConns() > 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open after the refusals", h.srv.ActiveConns())
		}
	}
}
