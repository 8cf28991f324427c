//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/wsframe"
)

// Adversarial tests of the streaming surface (WebSocket, HTTP/2, streamed
// answers). Tests that found a defect that is not fixed yet live in
// adv_stream_fail_test.go (build tag advfail).

// TestAdvWSValueAcrossFragments: an upstream message that carries the
// key split over many fragments, with a ping between two of them, reaches
// the client scrubbed.
func TestAdvWSValueAcrossFragments(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) {
		msg := "key=" + canary + "!"
		for i := 0; i < len(msg); i++ {
			op := byte(wsframe.OpContinuation)
			if i == 0 {
				op = wsframe.OpText
			}
			p.send(i == len(msg)-1, op, []byte{msg[i]})
			if i == 6 {
				p.send(true, wsframe.OpPing, []byte("x"))
			}
		}
		p.send(true, wsframe.OpClose, wsframe.ClosePayload(1000, ""))
		time.Sleep(200 * time.Millisecond)
	})
	c := a.dialWS(t, "/ws")
	got, _ := c.recvAll(5 * time.Second)
	checkNoCanary(t, got)
	is.True(strings.Contains(got, "[REDACTED]"))
}

// TestAdvWSHugeFrameClaim: a client frame that claims 2^62 bytes is
// refused at once (1009), before anything is allocated or forwarded; an
// upstream frame that claims as much and sends a little is relayed
// piece by piece and the relay ends when the upstream goes away.
func TestAdvWSHugeFrameClaim(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWS(t, func(p *wsPeer) {
		p.recvAll(3 * time.Second)
	})
	c := a.dialWS(t, "/ws")
	hdr := []byte{0x82, 0xFF, 0x40, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}
	_, err := c.c.Write(hdr)
	is.NoErr(err)
	_, code := c.recvAll(5 * time.Second)
	is.Equal(code, uint16(wsframe.CloseTooBig))
	is.True(waitAudit(t, a.eg, `"ended_by":"message_cap"`))
}

// TestAdvWS101HeaderEcho: the key in a 101 answer's header fields is
// scrubbed.
func TestAdvWS101HeaderEcho(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a := newAdvWSHead(t, "X-Echo: k="+canary+"\r\nSec-WebSocket-Protocol: "+canary+"\r\n", func(p *wsPeer) { p.recvAll(2 * time.Second) })
	c := a.dialWS(t, "/ws")
	checkNoCanary(t, c.head)
	is.True(strings.Contains(c.head, "[REDACTED]"))
}
