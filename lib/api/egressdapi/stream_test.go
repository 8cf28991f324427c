package egressdapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// scriptServer serves egress.request_stream on a fresh socket: it accepts
// with status 200 and sends the frames of the script named by the
// request's URL, then closes; what the client sent back is reported on
// got.
func scriptServer(t *testing.T, scripts map[string][]wire.StreamFrame, got chan<- string) *Client {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "hkx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "d", "api.sock")
	ctx, cancel := context.WithCancel(context.Background())
	l, err := sock.Listen(ctx, sock.Config{Path: path, Group: -1})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	op := rpc.Op{Name: OpEgressRequestStream, Roles: []rpc.Role{RoleClient},
		Handler: func(_ context.Context, c *rpc.Call) (any, error) {
			var req RequestRequest
			if err := c.Decode(&req); err != nil {
				return nil, err
			}
			c.Keep(req.URL, nil)
			return &RequestStreamResponse{Status: 200, Headers: []Header{{Name: "Content-Type", Value: "text/plain"}}}, nil
		},
		Stream: func(_ context.Context, c *rpc.Call, st *rpc.Stream) error {
			for i := range scripts[c.Kept().(string)] {
				if err := st.Send(&scripts[c.Kept().(string)][i]); err != nil {
					return err
				}
			}
			if c.Kept().(string) == "hold" { // wait for what the client sends
				st.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
				f, err := st.Recv()
				if err != nil {
					got <- "error"
					return nil
				}
				got <- f.T
			}
			return nil
		}}
	srv, err := rpc.NewServer(rpc.Config{Daemon: "egressd", Roles: rpc.Roles{RoleClient: {uint32(os.Geteuid())}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, op)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	c := rpc.NewClient(path, 5*time.Second)
	t.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return NewClient(c)
}

func TestResponseStream(t *testing.T) {
	t.Parallel()
	data := func(s string) wire.StreamFrame { return wire.StreamFrame{T: wire.StreamData, B: []byte(s)} }
	trailers := wire.StreamFrame{T: wire.StreamTrailers, H: []wire.HeaderField{{Name: "X-Sum", Value: "ok"}, {Name: "X-Empty"}}}
	eof := wire.StreamFrame{T: wire.StreamEOF}
	tests := []struct {
		name     string
		frames   []wire.StreamFrame
		body     string
		code     string // "" for io.EOF
		trailers []Header
	}{
		{name: "body, trailers, eof", frames: []wire.StreamFrame{data("he"), data(""), data("llo"), trailers, eof}, body: "hello",
			trailers: []Header{{Name: "X-Sum", Value: "ok"}, {Name: "X-Empty"}}},
		{name: "no trailers", frames: []wire.StreamFrame{data("x"), eof}, body: "x"},
		{name: "empty body", frames: []wire.StreamFrame{eof}},
		{name: "error frame", frames: []wire.StreamFrame{data("part"), {T: wire.StreamError, Code: CodeResponseAborted, Msg: "cut off"}},
			body: "part", code: CodeResponseAborted},
		{name: "closed without eof", frames: []wire.StreamFrame{data("part")}, body: "part", code: wire.CodeConnectionClosed},
		{name: "closed after trailers", frames: []wire.StreamFrame{data("part"), trailers}, body: "part", code: wire.CodeConnectionClosed},
		{name: "data after trailers", frames: []wire.StreamFrame{trailers, data("x"), eof}, code: wire.CodeResponseMalformed},
		{name: "two trailers frames", frames: []wire.StreamFrame{trailers, trailers, eof}, code: wire.CodeResponseMalformed},
		{name: "an exit frame", frames: []wire.StreamFrame{{T: wire.StreamExit}}, code: wire.CodeResponseMalformed},
		{name: "a resize frame", frames: []wire.StreamFrame{{T: wire.StreamResize, Rows: 1, Cols: 1}}, code: wire.CodeResponseMalformed},
	}
	scripts := map[string][]wire.StreamFrame{}
	for _, tt := range tests {
		scripts[tt.name] = tt.frames
	}
	c := scriptServer(t, scripts, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			rs, err := c.RequestStream(t.Context(), &RequestRequest{Invocation: "inv", Method: "GET", URL: tt.name})
			is.NoErr(err)
			defer rs.Close()
			is.Equal(rs.Status, 200)
			is.Equal(rs.Headers, []Header{{Name: "Content-Type", Value: "text/plain"}})
			body, err := io.ReadAll(rs)
			is.Equal(string(body), tt.body)
			if tt.code == "" {
				is.NoErr(err)
				is.Equal(rs.Trailers(), tt.trailers)
				return
			}
			is.Equal(wire.CodeOf(err), tt.code)
			is.True(!errors.Is(err, io.EOF))
			is.Equal(rs.Trailers(), nil)
			_, again := rs.Read(make([]byte, 1))
			is.Equal(again, err) // it stays failed
		})
	}
}

// TestResponseStreamClose: Close before the end sends detach; a Read
// after it is stream.closed.
func TestResponseStreamClose(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	got := make(chan string, 1)
	c := scriptServer(t, map[string][]wire.StreamFrame{"hold": {{T: wire.StreamData, B: []byte("x")}}}, got)
	rs, err := c.RequestStream(t.Context(), &RequestRequest{Invocation: "inv", Method: "GET", URL: "hold"})
	is.NoErr(err)
	n, err := rs.Read(make([]byte, 8))
	is.NoErr(err)
	is.Equal(n, 1)
	is.NoErr(rs.Close())
	is.Equal(<-got, wire.StreamDetach)
	_, err = rs.Read(make([]byte, 8))
	is.Equal(wire.CodeOf(err), wire.CodeStreamClosed)
	is.NoErr(rs.Close()) // again
}
