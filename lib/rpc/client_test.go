package rpc

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestCallEcho(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	tests := []struct {
		name string
		in   echoBody
	}{
		{"empty", echoBody{}},
		{"text", echoBody{Msg: "hello"}},
		{"negative", echoBody{N: -129}},
		{"map", echoBody{Msg: "m", N: 1 << 40, Tags: map[string]string{"b": "2", "a": "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			var out echoBody
			is.NoErr(h.client.Call(t.Context(), "test.echo", &tt.in, &out))
			is.Equal(out.Msg, tt.in.Msg)
			is.Equal(out.N, tt.in.N)
			is.Equal(len(out.Tags), len(tt.in.Tags))
		})
	}
}

func TestCorrelationID(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{})
	ctx := WithCorr(t.Context(), "c-1")
	var info infoBody
	is.NoErr(h.client.Call(ctx, "test.info", nil, &info))
	is.Equal(info.Corr, "c-1")
	is.Equal(info.CtxCorr, "c-1")

	// Audit events carry it: a denial and a protocol error.
	err := h.client.Call(ctx, "test.ops", nil, nil)
	asWire(t, err, wire.CodePeerDenied)
	evs := h.events.find(wire.CodePeerDenied)
	is.Equal(len(evs), 1)
	is.Equal(evs[0].Corr, "c-1")
	is.Equal(evs[0].Op, "test.ops")
	is.Equal(evs[0].Outcome, "denied")

	c := dialRaw(t, h.path)
	m := envelope("health")
	m["corr"], m["zz"] = "c-2", 1
	sendPayload(t, c, encode(t, m))
	is.Equal(errCode(readResp(t, c)), wire.CodeRequestUnknownField)
	evs = h.events.find(wire.CodeRequestUnknownField)
	is.Equal(len(evs), 1)
	is.Equal(evs[0].Corr, "c-2")

	// Without one, the handler sees none.
	info = infoBody{}
	is.NoErr(h.client.Call(t.Context(), "test.info", nil, &info))
	is.Equal(info.Corr, "")
	is.Equal(info.CtxCorr, "")
}

func TestDeadlineAsContext(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	t.Run("handler ctx deadline is the request deadline", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		d, _ := ctx.Deadline()
		var info infoBody
		is.NoErr(h.client.Call(ctx, "test.info", nil, &info))
		is.Equal(info.Deadline, d.UnixMilli())
		is.Equal(info.CtxDeadline, d.UnixMilli())
	})
	t.Run("client timeout bounds the deadline", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		c := NewClient(h.path, 2*time.Second)
		defer c.Close()
		before := time.Now()
		var info infoBody
		is.NoErr(c.Call(t.Context(), "test.info", nil, &info))
		got := time.UnixMilli(info.Deadline)
		is.True(got.After(before.Add(1900 * time.Millisecond)))
		is.True(got.Before(time.Now().Add(2 * time.Second)))
	})
	t.Run("blocked handler ends at the deadline", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		c := NewClient(h.path, 0)
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		begin := time.Now()
		err := c.Call(ctx, "test.slow", nil, nil)
		asWire(t, err, wire.CodeRequestDeadline)
		is.True(time.Since(begin) < 2*time.Second)
		// The client still works afterwards.
		is.NoErr(c.Call(t.Context(), "health", nil, nil))
	})
	t.Run("server answers deadline_exceeded itself", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		c := dialRaw(t, h.path)
		r := req("test.slow")
		r.Deadline = time.Now().Add(200 * time.Millisecond).UnixMilli()
		sendReq(t, c, r)
		ans := readResp(t, c)
		is.Equal(errCode(ans), wire.CodeRequestDeadline)
		is.Equal(ans.Err.Retry, wire.RetryAfterObserve)
	})
	t.Run("ctx already done", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := h.client.Call(ctx, "health", nil, nil)
		asWire(t, err, wire.CodeRequestDeadline)
	})
}

func TestHandlerFailures(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{})
	for range 3 {
		err := h.client.Call(t.Context(), "test.panic", nil, nil)
		we := asWire(t, err, wire.CodeInternal)
		is.Equal(we.Msg, "internal error")
		is.NoErr(h.client.Call(t.Context(), "health", nil, nil)) // still serving, same client
	}
	err := h.client.Call(t.Context(), "test.internal", nil, nil)
	we := asWire(t, err, wire.CodeInternal)
	is.Equal(we.Msg, "internal error")
	is.Equal(we.Retry, wire.RetryAfterObserve)
	is.True(len(leaks(err.Error())) == 0)
	is.NoErr(h.client.Call(t.Context(), "health", nil, nil))
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	t.Run("socket missing", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		c := NewClient(filepath.Join(makeDir(t), "none.sock"), time.Second)
		err := c.Call(t.Context(), "health", nil, nil)
		is.True(errors.Is(err, &wire.Error{Code: wire.CodeUnavailable}))
		var we *wire.Error
		is.True(errors.As(err, &we))
		is.Equal(we.Code, wire.CodeUnavailable)
		is.Equal(we.Retry, wire.RetrySafe)
	})
	t.Run("server killed mid-call", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		path := filepath.Join(makeDir(t), "d", "api.sock")
		child := startChildServer(t, path)
		c := NewClient(path, 5*time.Second)
		defer c.Close()
		is.NoErr(c.Call(t.Context(), "health", nil, nil))
		go func() { time.Sleep(200 * time.Millisecond); child.Process.Kill() }()
		begin := time.Now()
		err := c.Call(t.Context(), "test.slow", nil, nil)
		we := asWire(t, err, wire.CodeConnectionClosed)
		is.Equal(we.Retry, wire.RetryAfterObserve)
		is.True(time.Since(begin) < 3*time.Second)
		// The next call finds no daemon.
		child.Wait()
		asWire(t, c.Call(t.Context(), "health", nil, nil), wire.CodeUnavailable)
	})
	tests := []struct {
		name   string
		answer func(req *wire.Request) []byte
		code   string
	}{
		{"ok answer for another id", func(r *wire.Request) []byte {
			return wire.AppendResponse(nil, &wire.Response{ID: newID(), OK: true})
		}, wire.CodeResponseMismatch},
		{"error answer for another id", func(r *wire.Request) []byte {
			return wire.AppendResponse(nil, &wire.Response{ID: newID(), Err: &wire.ErrorBody{Code: wire.CodeOpUnknown}})
		}, wire.CodeResponseMismatch},
		{"error answer with empty id", func(r *wire.Request) []byte {
			return wire.AppendResponse(nil, &wire.Response{ID: []byte{}, Err: &wire.ErrorBody{Code: wire.CodeFrameMalformed, Msg: "x"}})
		}, wire.CodeFrameMalformed},
		{"not msgpack", func(r *wire.Request) []byte { return []byte{0xc1} }, wire.CodeResponseMalformed},
		{"version 2", func(r *wire.Request) []byte {
			b, _ := wire.Marshal(map[string]any{"v": 2, "id": r.ID, "ok": true})
			return b
		}, wire.CodeResponseMalformed},
		{"body of the wrong kind", func(r *wire.Request) []byte {
			b, _ := wire.Marshal(map[string]any{"msg": 5})
			return wire.AppendResponse(nil, &wire.Response{ID: r.ID, OK: true, Body: b})
		}, wire.CodeResponseMalformed},
		{"failed answer without err", func(r *wire.Request) []byte {
			return wire.AppendResponse(nil, &wire.Response{ID: r.ID})
		}, wire.CodeResponseMalformed},
		{"closed without answer", func(r *wire.Request) []byte { return nil }, wire.CodeConnectionClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := fakeServer(t, tt.answer)
			c := NewClient(path, 2*time.Second)
			defer c.Close()
			var out echoBody
			err := c.Call(t.Context(), "test.echo", &echoBody{Msg: "x"}, &out)
			asWire(t, err, tt.code)
			is.True(err != nil)
		})
	}
}

// fakeServer serves one connection: it reads a request and writes
// answer(request) as a frame (or nothing), then closes.
func fakeServer(t *testing.T, answer func(*wire.Request) []byte) string {
	t.Helper()
	path := filepath.Join(makeDir(t), "f.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		p, err := wire.ReadFrame(c, 0)
		if err != nil {
			return
		}
		r, err := wire.DecodeRequest(p, wire.Limits{})
		if err != nil {
			return
		}
		if a := answer(r); a != nil {
			c.Write(wire.AppendFrame(nil, a))
		}
	}()
	return path
}
