package rpc

import (
	"bytes"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// TestRequestChecks sends hand-made requests on a raw connection and checks
// the code of each answer, that the answer echoes the request id, and that
// the connection still serves a health request afterwards.
func TestRequestChecks(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	now := time.Now()
	tests := []struct {
		name    string
		payload func(t *testing.T) ([]byte, []byte) // payload, id to expect
		code    string
	}{
		{"ok", func(t *testing.T) ([]byte, []byte) {
			r := req("health")
			return wire.AppendRequest(nil, r), r.ID
		}, ""},
		{"expired deadline", func(t *testing.T) ([]byte, []byte) {
			r := req("health")
			r.Deadline = now.Add(-time.Second).UnixMilli()
			return wire.AppendRequest(nil, r), r.ID
		}, wire.CodeRequestDeadline},
		{"deadline now", func(t *testing.T) ([]byte, []byte) {
			r := req("health")
			r.Deadline = time.Now().UnixMilli()
			return wire.AppendRequest(nil, r), r.ID
		}, wire.CodeRequestDeadline},
		{"deadline more than 10 min ahead", func(t *testing.T) ([]byte, []byte) {
			r := req("health")
			r.Deadline = time.Now().Add(10*time.Minute + 5*time.Second).UnixMilli()
			return wire.AppendRequest(nil, r), r.ID
		}, wire.CodeRequestDeadline},
		{"deadline 9 min ahead", func(t *testing.T) ([]byte, []byte) {
			r := req("health")
			r.Deadline = time.Now().Add(9 * time.Minute).UnixMilli()
			return wire.AppendRequest(nil, r), r.ID
		}, ""},
		{"unknown op", func(t *testing.T) ([]byte, []byte) {
			r := req("nope.nothing")
			return wire.AppendRequest(nil, r), r.ID
		}, wire.CodeOpUnknown},
		{"version 2", func(t *testing.T) ([]byte, []byte) {
			m := envelope("health")
			m["v"] = 2
			return encode(t, m), m["id"].([]byte)
		}, wire.CodeProtocolVersion},
		{"unknown request field", func(t *testing.T) ([]byte, []byte) {
			m := envelope("health")
			m["zz"] = "x"
			return encode(t, m), m["id"].([]byte)
		}, wire.CodeRequestUnknownField},
		{"unknown body field", func(t *testing.T) ([]byte, []byte) {
			r := req("test.echo")
			r.Body = encode(t, map[string]any{"msg": "hi", "extra": 1})
			return wire.AppendRequest(nil, r), r.ID
		}, wire.CodeRequestUnknownField},
		{"body field of the wrong kind", func(t *testing.T) ([]byte, []byte) {
			r := req("test.echo")
			r.Body = encode(t, map[string]any{"msg": 7})
			return wire.AppendRequest(nil, r), r.ID
		}, wire.CodeFrameMalformed},
		{"missing deadline", func(t *testing.T) ([]byte, []byte) {
			m := envelope("health")
			delete(m, "deadline")
			return encode(t, m), m["id"].([]byte)
		}, wire.CodeRequestInvalid},
		{"bad corr", func(t *testing.T) ([]byte, []byte) {
			r := req("health")
			r.Corr = "has space"
			return wire.AppendRequest(nil, r), r.ID
		}, wire.CodeRequestInvalid},
		{"idem too long", func(t *testing.T) ([]byte, []byte) {
			r := req("test.idem")
			r.Idem = strings.Repeat("k", wire.MaxIdemLen+1)
			return wire.AppendRequest(nil, r), r.ID
		}, wire.CodeRequestInvalid},
		{"op without the peer's role", func(t *testing.T) ([]byte, []byte) {
			r := req("test.ops")
			return wire.AppendRequest(nil, r), r.ID
		}, wire.CodePeerDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			c := dialRaw(t, h.path)
			payload, id := tt.payload(t)
			sendPayload(t, c, payload)
			r := readResp(t, c)
			is.Equal(errCode(r), tt.code)
			is.Equal(r.ID, id) // the answer carries the request's id
			if tt.code != "" {
				is.True(r.Err.Retry != "")
				is.True(r.Err.Msg != "")
			}
			// The connection survives a request-level error.
			next := req("health")
			sendReq(t, c, next)
			r = readResp(t, c)
			is.True(r.OK)
			is.Equal(r.ID, next.ID)
		})
	}
}

func TestReplayedID(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{})
	c := dialRaw(t, h.path)
	r := req("health")
	sendReq(t, c, r)
	is.True(readResp(t, c).OK)
	sendReq(t, c, r) // same id, same connection
	ans := readResp(t, c)
	is.Equal(errCode(ans), wire.CodeRequestReplayed)
	is.Equal(ans.ID, r.ID)

	// Another connection cannot reuse it either, nor with another op.
	c2 := dialRaw(t, h.path)
	r2 := *r
	r2.Op = "test.info"
	sendReq(t, c2, &r2)
	is.Equal(errCode(readResp(t, c2)), wire.CodeRequestReplayed)
	evs := h.events.find(wire.CodeRequestReplayed)
	is.True(len(evs) >= 2)
	is.Equal(evs[0].Outcome, "error")
	is.Equal(evs[0].Peer.UID, euid)
}

// TestFrameErrors: frame-level errors are answered once with an empty id
// and end the connection.
func TestFrameErrors(t *testing.T) {
	t.Parallel()
	h := start(t, options{cfg: func(c *Config) { c.MaxFrame = 4096 }})
	hdr := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	tests := []struct {
		name      string
		bytes     []byte
		closeSend bool // half-close after writing (EOF inside the frame)
		code      string
		salvageID bool // the id is still readable and echoed
	}{
		{"length zero", hdr(0), false, wire.CodeFrameEmpty, false},
		{"length over the limit", hdr(4097), false, wire.CodeFrameTooLarge, false},
		{"length far over the limit", hdr(0xffffffff), false, wire.CodeFrameTooLarge, false},
		{"truncated payload", append(hdr(100), bytes.Repeat([]byte{0x80}, 10)...), true, wire.CodeFrameTruncated, false},
		{"truncated header", []byte{0, 0}, true, wire.CodeFrameTruncated, false},
		{"header without payload", hdr(10), true, wire.CodeFrameTruncated, false},
		{"not msgpack", append(hdr(3), 0xc1, 0xc1, 0xc1), false, wire.CodeFrameMalformed, false},
		{"not a map", wire.AppendFrame(nil, wire.AppendStr(nil, "hello")), false, wire.CodeFrameMalformed, false},
		{"trailing bytes", wire.AppendFrame(nil, append(wire.AppendRequest(nil, req("health")), 0x01)), false, wire.CodeFrameMalformed, true},
		{"unsorted keys", wire.AppendFrame(nil, []byte{0x82, 0xa1, 'v', 0x01, 0xa2, 'i', 'd', 0xc4, 0x00}), false, wire.CodeFrameMalformed, false},
		{"id is str", func() []byte {
			m := envelope("health")
			m["id"] = "0123456789abcdef"
			return wire.AppendFrame(nil, encode(t, m))
		}(), false, wire.CodeFrameMalformed, false},
		{"id too short", func() []byte {
			m := envelope("health")
			m["id"] = []byte{1, 2, 3}
			return wire.AppendFrame(nil, encode(t, m))
		}(), false, wire.CodeFrameMalformed, false},
		{"missing v", func() []byte {
			m := envelope("health")
			delete(m, "v")
			return wire.AppendFrame(nil, encode(t, m))
		}(), false, wire.CodeFrameMalformed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			c := dialRaw(t, h.path)
			writeRaw(t, c, tt.bytes)
			if tt.closeSend {
				is.NoErr(c.CloseWrite())
			}
			p := readPayload(t, c)
			r, err := wire.DecodeResponse(p, wire.Limits{})
			is.NoErr(err)
			is.Equal(errCode(r), tt.code)
			if tt.salvageID {
				is.Equal(len(r.ID), wire.IDLen)
			} else {
				is.Equal(len(r.ID), 0)
				is.True(bytes.Contains(p, []byte{0xa2, 'i', 'd', 0xc4, 0x00})) // id: empty bin
			}
			is.True(closedWithin(c, 2*time.Second)) // answered once, then closed
		})
	}
}

// TestSlowClientCutOff trickles a frame one byte per second: the server
// must close the connection once ReadTimeout has passed since its first
// byte, long before the frame could complete.
func TestSlowClientCutOff(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{cfg: func(c *Config) { c.ReadTimeout = 300 * time.Millisecond; c.IdleTimeout = time.Second }})
	c := dialRaw(t, h.path)
	frame := wire.AppendFrame(nil, wire.AppendRequest(nil, req("health")))
	closed := make(chan time.Duration, 1)
	begin := time.Now()
	go func() {
		buf := make([]byte, 64)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			if _, err := c.Read(buf); err != nil {
				closed <- time.Since(begin)
				return
			}
		}
	}()
	sent := 0
	for _, b := range frame {
		if _, err := c.Write([]byte{b}); err != nil {
			break
		}
		sent++
		select {
		case d := <-closed:
			is.True(d < time.Second) // cut off within ReadTimeout, before the second byte
			is.True(sent < len(frame))
			return
		case <-time.After(time.Second):
		}
	}
	t.Fatalf("connection still open after %d bytes", sent)
}

func TestIdleClientClosed(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{cfg: func(c *Config) { c.ReadTimeout = 300 * time.Millisecond; c.IdleTimeout = time.Second }})
	c := dialRaw(t, h.path)
	// One request, then silence: the idle timer restarts after each answer.
	sendReq(t, c, req("health"))
	is.True(readResp(t, c).OK)
	begin := time.Now()
	is.True(closedWithin(c, 3*time.Second))
	d := time.Since(begin)
	is.True(d >= 900*time.Millisecond)
	is.True(d < 2*time.Second)
}

func TestMaxConns(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	h := start(t, options{cfg: func(c *Config) { c.MaxConns = 2 }})
	a, b := dialRaw(t, h.path), dialRaw(t, h.path)
	for _, c := range []*net.UnixConn{a, b} {
		sendReq(t, c, req("health"))
		is.True(readResp(t, c).OK)
	}
	is.Equal(h.srv.ActiveConns(), 2)
	over := dialRaw(t, h.path)
	r := readResp(t, over)
	is.Equal(errCode(r), wire.CodeServerBusy)
	is.Equal(r.Err.Retry, wire.RetrySafe)
	is.Equal(len(r.ID), 0)
	is.True(closedWithin(over, 2*time.Second))

	// Through the client, too.
	err := NewClient(h.path, time.Second).Call(t.Context(), "health", nil, nil)
	asWire(t, err, wire.CodeServerBusy)

	// A freed slot is usable again.
	a.Close()
	deadline := time.Now().Add(2 * time.Second)
	for h.srv.ActiveConns() > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cl := NewClient(h.path, time.Second)
	defer cl.Close()
	is.NoErr(cl.Call(t.Context(), "health", nil, nil))
}
