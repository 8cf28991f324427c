package rpc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/lib/wire"
)

// uploadBody is test.upload's accepting answer.
type uploadBody struct {
	N int `msgpack:"n"`
}

// uploadOps are Upload ops: test.upload reads data frames until eof
// before it answers (a frame "refuse" refuses at once, unread frames
// behind it), then echoes the body back in one data frame and waits for
// detach; test.upload_ops is the same for the ops role only; test.plain
// answers whether its Call has an Upload stream (it is no Upload op).
func uploadOps() []Op {
	handler := func(_ context.Context, c *Call) (any, error) {
		up := c.Upload()
		up.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
		var body []byte
		for {
			f, err := up.Recv()
			if err != nil {
				return nil, err
			}
			if f.T == wire.StreamEOF {
				break
			}
			if string(f.B) == "refuse" {
				return nil, wire.Errorf("test.refused", "refused mid-upload")
			}
			body = append(body, f.B...)
		}
		c.Keep(body, nil)
		return &uploadBody{N: len(body)}, nil
	}
	stream := func(_ context.Context, c *Call, st *Stream) error {
		if err := st.Send(&wire.StreamFrame{T: wire.StreamData, B: c.Kept().([]byte)}); err != nil {
			return err
		}
		f, err := st.Recv()
		if err != nil {
			return err
		}
		if f.T != wire.StreamDetach {
			return wire.Errorf(wire.CodeRequestInvalid, "want detach")
		}
		return nil
	}
	return []Op{
		{Name: "test.upload", Roles: []Role{roleAdmin}, Handler: handler, Stream: stream, Upload: true},
		{Name: "test.upload_ops", Roles: []Role{roleOps}, Handler: handler, Stream: stream, Upload: true},
		{Name: "test.plain", Roles: []Role{roleAdmin}, Handler: func(_ context.Context, c *Call) (any, error) {
			return map[string]any{"upload": c.Upload() != nil}, nil
		}},
	}
}

// TestUpload: an Upload op's Handler reads the frames its caller sends
// after the request, before it answers; the StreamFunc goes on with the
// same connection. A refusal, by the Handler or before it, closes the
// connection (the caller's frames cannot be read as requests), where a
// refused ordinary op leaves it open.
func TestUpload(t *testing.T) {
	t.Parallel()
	h := start(t, options{ops: uploadOps()})
	t.Run("frames before the answer", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		p, err := h.client.StartStream(t.Context(), "test.upload", nil)
		is.NoErr(err)
		defer p.Stream().Close()
		want := bytes.Repeat([]byte("0123456789abcdef"), 20<<10) // 320 KiB: more than the socket buffers
		sent := make(chan error, 1)
		go func() {
			for rest := want; len(rest) > 0; rest = rest[min(len(rest), 64<<10):] {
				if err := p.Stream().Send(&wire.StreamFrame{T: wire.StreamData, B: rest[:min(len(rest), 64<<10)]}); err != nil {
					sent <- err
					return
				}
			}
			sent <- p.Stream().Send(&wire.StreamFrame{T: wire.StreamEOF})
		}()
		var acc uploadBody
		is.NoErr(p.Answer(t.Context(), &acc))
		is.NoErr(<-sent)
		is.Equal(acc.N, len(want))
		p.Stream().Conn().SetDeadline(time.Now().Add(5 * time.Second))
		f, err := p.Stream().Recv()
		is.NoErr(err)
		is.Equal(f.T, wire.StreamData)
		is.True(bytes.Equal(f.B, want))
		is.NoErr(p.Stream().Send(&wire.StreamFrame{T: wire.StreamDetach}))
		_, err = p.Stream().Recv()
		is.True(errors.Is(err, io.EOF))
	})
	t.Run("refused mid-upload", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		p, err := h.client.StartStream(t.Context(), "test.upload", nil)
		is.NoErr(err)
		sent := make(chan error, 1)
		go func() {
			if err := p.Stream().Send(&wire.StreamFrame{T: wire.StreamData, B: []byte("refuse")}); err != nil {
				sent <- err
				return
			}
			for { // more than the server will read: the refusal ends it
				if err := p.Stream().Send(&wire.StreamFrame{T: wire.StreamData, B: make([]byte, 64<<10)}); err != nil {
					sent <- err
					return
				}
			}
		}()
		err = p.Answer(t.Context(), nil)
		asWire(t, err, "test.refused")
		is.True(<-sent != nil) // the connection is closed under the sender
	})
	t.Run("refused connection closes", func(t *testing.T) {
		t.Parallel()
		// After the refusal an Upload op's connection ends unread; an
		// ordinary op's goes on, and reads the frame as a request.
		for _, tc := range []struct {
			name, op, code string
			next           string // the code of a second answer ("": none, the connection ended)
		}{
			{"handler refusal", "test.upload", "test.refused", ""},
			{"role refusal", "test.upload_ops", wire.CodePeerDenied, ""},
			{"ordinary op refused", "test.ops", wire.CodePeerDenied, wire.CodeFrameMalformed},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				is := is.New(t)
				c := dialRaw(t, h.path)
				sendReq(t, c, req(tc.op))
				sendPayload(t, c, encode(t, map[string]any{"t": "data", "b": []byte("refuse")}))
				is.Equal(errCode(readResp(t, c)), tc.code)
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				rest, err := io.ReadAll(c)
				is.NoErr(err) // closed, not timed out
				if tc.next == "" {
					is.Equal(len(rest), 0)
					return
				}
				ans, err := wire.DecodeResponse(rest[4:], wire.Limits{})
				is.NoErr(err)
				is.Equal(ans.Err.Code, tc.next)
			})
		}
	})
	t.Run("ordinary ops have no upload stream", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		var out map[string]any
		is.NoErr(h.client.Call(t.Context(), "test.plain", nil, &out))
		is.Equal(out["upload"], false)
	})
}

// TestUploadNeedsStream: an Upload op without a StreamFunc is refused
// when the server is made.
func TestUploadNeedsStream(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, err := NewServer(Config{Logger: slog.New(slog.DiscardHandler)}, Op{Name: "x.up", Handler: func(context.Context, *Call) (any, error) { return nil, nil }, Upload: true})
	is.True(err != nil && strings.Contains(err.Error(), "StreamFunc"))
	_, err = NewServer(Config{Logger: slog.New(slog.DiscardHandler)}, Op{Name: "x.up", Handler: func(context.Context, *Call) (any, error) { return nil, nil }, Upload: true,
		Stream: func(context.Context, *Call, *Stream) error { return nil }})
	is.NoErr(err)
}
