package rpc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// TestAuthenticateDeniedCarriesID: a peer that Authenticate refuses gets
// its error under its first request's id (docs/protocol.md: every error
// answers its request), and the connection is closed; without a request
// it can read (nothing sent within ReadTimeout, a frame over
// deniedFrameMax, a frame that is not a request) the answer has the
// empty id. No handler runs.
func TestAuthenticateDeniedCarriesID(t *testing.T) {
	t.Parallel()
	h := start(t, options{cfg: func(c *Config) {
		c.ReadTimeout = 300 * time.Millisecond
		c.Authenticate = func(sock.Peer) error { return errors.New("executable not on the allowlist") }
	}})
	t.Run("a request", func(t *testing.T) {
		is := is.New(t)
		c := dialRaw(t, h.path)
		r := req("test.echo")
		sendReq(t, c, r)
		resp := readResp(t, c)
		is.Equal(resp.ID, r.ID) // the request's own id
		is.Equal(resp.Err.Code, wire.CodePeerDenied)
		is.True(!strings.Contains(resp.Err.Msg, "allowlist")) // the reason stays local
		is.Equal(len(readPayloadOrEOF(c)), 0)                 // then closed
	})
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"nothing sent", nil},
		{"a frame over the bound", wire.AppendFrame(nil, make([]byte, deniedFrameMax+1))},
		{"not a request", wire.AppendFrame(nil, []byte{0xc0})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			c := dialRaw(t, h.path)
			if tc.frame != nil {
				_, _ = c.Write(tc.frame) // the helper may close before reading it all
			}
			resp := readResp(t, c)
			is.Equal(resp.ID, []byte{}) // the empty id
			is.Equal(resp.Err.Code, wire.CodePeerDenied)
		})
	}
	is.New(t).Equal(h.counter.Load(), int64(0)) // no handler ran
}

// readPayloadOrEOF returns the next frame on c, or nil once c is closed.
func readPayloadOrEOF(c interface {
	Read([]byte) (int, error)
	SetReadDeadline(time.Time) error
}) []byte {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	p, _ := wire.ReadFrame(c, 0)
	return p
}
