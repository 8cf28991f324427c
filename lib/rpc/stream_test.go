package rpc

import (
	"errors"
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
