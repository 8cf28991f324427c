package proxy

import (
	"bufio"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/wsframe"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// wantsWebSocket reports whether req asks to switch to WebSocket (RFC
// 6455 section 4.1): an HTTP/1.1 GET with "Upgrade: websocket" and
// "Connection: upgrade" (tokens, any case).
func wantsWebSocket(req *http.Request) bool {
	return req.Method == http.MethodGet && req.ProtoAtLeast(1, 1) &&
		httpguts.HeaderValuesContainsToken(req.Header["Upgrade"], "websocket") &&
		httpguts.HeaderValuesContainsToken(req.Header["Connection"], "upgrade")
}

// End reasons of a relayed WebSocket connection, in the after record's
// ended_by.
const (
	wsClosed     = "closed" // a side closed, or sent a close frame
	wsPolicy     = "policy" // a client message broke policy: 1008 to both
	wsEcho       = "echo"   // an upstream message held a value that cannot be removed: 1008
	wsIdle       = "idle_timeout"
	wsProtocol   = "protocol"    // a malformed frame: 1002
	wsTooBig     = "message_cap" // a client message over -max-request-body: 1009
	wsClientGone = "client_closed"
	wsTotal      = "total_timeout"
	wsStopping   = "shutting_down"
	wsDropped    = "bundle.drop" // the bundle was dropped: its values are no longer scrubbed
)

// websocket relays a WebSocket connection the upstream accepted (101):
// it writes the 101 with the sanitized header, then copies frames both
// ways until either side closes or breaks the rules, and reports false
// (the connection is taken over). Client messages stream through the
// outbound scan (fromClient: a held value in any form, any placeholder
// — no substitution happens inside messages — found across fragments
// and messages), forwarded as the scan releases them; a finding closes
// both sides with 1008 (policy violation). Upstream messages are
// scrubbed as they arrive, exactly as streamed answers are, and
// re-framed (a replacement changes their length); one that holds a
// value in a form that cannot be removed in place, or completes one
// begun in an earlier message, closes the client with 1008 before that
// form. Control frames pass (a close or ping payload is scanned and
// scrubbed too). No byte moving for ExchangeIdle in either direction
// closes both. One audit pair covers the connection: the pipeline's
// before record, and the after record with the bytes each way and
// ended_by.
func (c *conn) websocket(st *pipeline.Stream) bool {
	defer st.Close()
	up := st.Upgraded()
	c.writeBy(c.s.cfg.ExchangeIdle)
	bw := c.w()
	writeStatusLine(bw, http.StatusSwitchingProtocols)
	bw.WriteString("Connection: Upgrade\r\nUpgrade: websocket\r\n")
	writeFields(bw, st.Header)
	bw.WriteString("\r\n")
	if err := c.flush(); err != nil {
		up.Close()
		st.End(wsClientGone, clientGone(err))
		return false
	}
	r := &wsRelay{c: c, st: st, up: up, upr: bufio.NewReaderSize(up, 16<<10), lingered: make(chan struct{})}
	r.run()
	return false
}

// wsRelay is one relayed WebSocket connection.
type wsRelay struct {
	c   *conn
	st  *pipeline.Stream
	up  io.ReadWriteCloser
	upr *bufio.Reader

	upMu, clMu sync.Mutex // writes to the upstream, to the client
	once       sync.Once
	// lingering is set when end half-closed the client's connection;
	// lingered is closed when it closed it after clientLinger.
	lingering atomic.Bool
	lingered  chan struct{}
	lastMu    sync.Mutex
	last      time.Time // the last byte either way (idle)
}

// run copies both ways until both directions end, then closes both
// connections.
func (r *wsRelay) run() {
	r.touch()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.fromClient()
	}()
	stopIdle := r.watchIdle()
	r.fromUpstream()
	<-done
	stopIdle()
	r.up.Close()
	if r.lingering.Load() {
		<-r.lingered // the caller closes the connection: not before
	}
}

func (r *wsRelay) touch() {
	r.lastMu.Lock()
	r.last = time.Now()
	r.lastMu.Unlock()
}

// watchIdle closes both sides once no frame moved for ExchangeIdle.
func (r *wsRelay) watchIdle() (stop func()) {
	idle := r.c.s.cfg.ExchangeIdle
	t := time.NewTicker(min(idle/4, time.Second))
	quit := make(chan struct{})
	go func() {
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-r.st.Done():
				if r.st.EndedBy() == wsTotal {
					r.end(wsTotal, wire.Errorf(egressdapi.CodeTimeout, "the exchange took longer than the total timeout"), wsframe.CloseGoingAway)
				} else {
					r.end(wsStopping, wire.Errorf(wire.CodeServerShuttingDown, "egressd is stopping"), wsframe.CloseGoingAway)
				}
				return
			case <-r.st.Dropped():
				r.end(wsDropped, wire.Errorf(egressdapi.CodeBundleUnknown, "the invocation's bundle was dropped"), wsframe.CloseGoingAway)
				return
			case <-t.C:
				r.lastMu.Lock()
				quiet := time.Since(r.last)
				r.lastMu.Unlock()
				if quiet >= idle {
					r.end(wsIdle, wire.Errorf(egressdapi.CodeTimeout, "no WebSocket frame moved for the idle timeout"), wsframe.CloseGoingAway)
					return
				}
			}
		}
	}()
	return func() { close(quit) }
}

// upCloseGrace is how long end waits to send the upstream its close
// frame before it closes the connection anyway.
const upCloseGrace = time.Second

// clientLinger is how long end keeps the client's connection open for
// reading after its close frame: a client still sending (the rest of a
// message egressd refused) would otherwise meet a reset that can discard
// the close frame before it reads it (RFC 6455 section 7.1.1 has the
// server close the TCP connection after the closing handshake).
const clientLinger = time.Second

// end closes both sides, once: a close frame with code to each (the
// upstream's masked, as a client's must be), then the connections, and
// records why.
func (r *wsRelay) end(why string, err error, code uint16) {
	r.once.Do(func() {
		r.st.End(why, err)
		if code != 0 {
			payload := wsframe.ClosePayload(code, "egressd: "+wire.CodeOf(err))
			r.writeClientFrame(wsframe.Header{Fin: true, Opcode: wsframe.OpClose}, payload)
			// The upstream's close frame waits for a write in progress
			// (which has no deadline: an upstream that reads nothing
			// blocks it) at most upCloseGrace; closing the upstream then
			// fails both writes.
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				r.writeUpstream(wsframe.Header{Fin: true, Opcode: wsframe.OpClose}, payload)
			}()
			t := time.NewTimer(upCloseGrace)
			select {
			case <-sent:
			case <-t.C:
			}
			t.Stop()
		}
		r.up.Close()
		if code == 0 || code == wsframe.CloseGoingAway {
			// Nothing the client sent was refused (egressd ends the
			// relay: idle, total, stopping): it may not be reading or
			// sending at all, so there is nothing to linger for.
			r.c.c.Close()
			return
		}
		// Half-close: the close frame and TLS close_notify are out, and
		// what the client still sends is read (fromClient goes on until
		// its next write upstream fails) until the connection closes.
		r.lingering.Store(true)
		time.AfterFunc(clientLinger, func() {
			r.c.c.Close()
			close(r.lingered)
		})
		if cw, ok := r.c.c.(interface{ CloseWrite() error }); ok {
			// Not on this goroutine: a TLS close_notify waits for a
			// write to the client in progress, which the Close above
			// breaks (tls.Conn.Close does not wait for it).
			go cw.CloseWrite()
		}
	})
}

// frameCost is what one frame of a client message costs beyond its
// payload, in bytes counted against -max-request-body: a message of
// empty frames is bounded too (each frame is work and a wakeup).
const frameCost = 32

// wsPiece is the most of a client frame's payload read at once.
const wsPiece = 32 << 10

// clientMessage is the client message being relayed.
type clientMessage struct {
	open   bool
	opcode byte  // its opcode, until its first frame went to the upstream
	size   int64 // payload bytes and frameCost per frame so far
	pend   []byte
	at     int64 // offset of pend[0] among all data bytes of the connection
}

// fromClient relays client frames. Data frames stream: every data
// message of the connection is one text to the outbound scan
// (pipeline.Outbound), so a value or a placeholder split over fragments
// or over messages is found; a message's bytes go to the upstream as
// the scan releases them, re-framed (continuation frames of the same
// message), and at the message's end what is held back goes with its
// last frame (a message is delivered whole: a protocol waits for it),
// while the scan goes on into the next message, so a finding that a
// later message completes is caught before its completing bytes leave.
// Control frames (whole, at most 125 bytes) are another such text. A
// finding closes both sides with 1008 and nothing after it is sent; a
// message over MaxBody is 1009. Nothing is held in the buffer budget.
func (r *wsRelay) fromClient() {
	var (
		p     = r.c.s.cfg.Pipeline
		data  = p.NewOutbound(false)
		ctrl  = p.NewOutbound(false)
		msg   clientMessage
		limit = int64(r.c.s.cfg.MaxBody)
		buf   = make([]byte, wsPiece)
	)
	for {
		h, err := wsframe.ReadHeader(r.c.br, limit)
		if err != nil {
			r.readFailed(err, true)
			return
		}
		if !h.Masked { // RFC 6455 section 5.1: a client's frames are masked
			r.end(wsProtocol, wire.Errorf(egressdapi.CodeInvalidRequest, "an unmasked client frame"), wsframe.CloseProtocolError)
			return
		}
		if h.IsControl() {
			pl := make([]byte, h.Length)
			if _, err := io.ReadFull(r.c.br, pl); err != nil {
				r.readFailed(err, true)
				return
			}
			wsframe.MaskBytes(h.Mask, 0, pl)
			r.touch()
			if _, err := ctrl.Next(pl); err != nil {
				r.end(wsPolicy, err, wsframe.ClosePolicy)
				return
			}
			if !r.writeUpstream(wsframe.Header{Fin: true, Opcode: h.Opcode}, pl) {
				return
			}
			r.st.Count(uint64(len(pl)), 0) // a channel to the upstream like any message
			if h.Opcode == wsframe.OpClose {
				r.st.End(wsClosed, nil)
			}
			continue
		}
		if (h.Opcode == wsframe.OpContinuation) != msg.open {
			r.end(wsProtocol, wire.Errorf(egressdapi.CodeInvalidRequest, "a continuation frame out of place"), wsframe.CloseProtocolError)
			return
		}
		if !msg.open {
			msg.open, msg.opcode, msg.size = true, h.Opcode, 0
		}
		if msg.size += h.Length + frameCost; msg.size > limit {
			r.end(wsTooBig, wire.Errorf(egressdapi.CodeTooLarge, "a WebSocket message is larger than %d bytes", limit), wsframe.CloseTooBig)
			return
		}
		for pos := int64(0); pos < h.Length; {
			piece := buf[:min(h.Length-pos, wsPiece)]
			if _, err := io.ReadFull(r.c.br, piece); err != nil {
				r.readFailed(err, true)
				return
			}
			wsframe.MaskBytes(h.Mask, pos, piece)
			pos += int64(len(piece))
			r.touch()
			msg.pend = append(msg.pend, piece...)
			rel, err := data.Next(piece)
			if err != nil {
				r.end(wsPolicy, err, wsframe.ClosePolicy)
				return
			}
			if !r.sendClient(&msg, rel-msg.at, false) {
				return
			}
		}
		if h.Fin {
			if !r.sendClient(&msg, int64(len(msg.pend)), true) {
				return
			}
			msg.open = false
		}
	}
}

// sendClient sends the first n pending bytes of msg to the upstream as
// one frame, the message's last when fin.
func (r *wsRelay) sendClient(msg *clientMessage, n int64, fin bool) bool {
	n = max(0, min(n, int64(len(msg.pend))))
	if n == 0 && !fin {
		return true
	}
	if !r.writeUpstream(wsframe.Header{Fin: fin, Opcode: msg.opcode}, msg.pend[:n]) {
		return false
	}
	msg.opcode = wsframe.OpContinuation
	r.st.Count(uint64(n), 0)
	msg.pend = msg.pend[:copy(msg.pend, msg.pend[n:])]
	msg.at += n
	return true
}

// fromUpstream relays upstream frames: data messages scrubbed as they
// arrive and re-framed, control frames scrubbed one by one.
func (r *wsRelay) fromUpstream() {
	var (
		sc     pipeline.BodyScrubber // the current message's; nil between messages
		opcode byte                  // the current message's, until its first frame out
		out    []byte
	)
	scrub := r.c.s.cfg.Registry.Scrubber()
	// Each message is scrubbed on its own; what the client receives of
	// all of them and of every control frame, in the order it is
	// written, is read as one text too, so a value the upstream splits
	// over messages, or between a message and a ping or a close reason,
	// is caught before the frame that completes it.
	cross := scrub.NewDetector()
	for {
		h, err := wsframe.ReadHeader(r.upr, 0)
		if err != nil {
			r.readFailed(err, false)
			return
		}
		if h.Masked { // RFC 6455 section 5.1: a server's frames are not
			r.end(wsProtocol, wire.Errorf(egressdapi.CodeUpstreamError, "a masked upstream frame"), wsframe.CloseProtocolError)
			return
		}
		if h.IsControl() {
			p := make([]byte, h.Length)
			if _, err := io.ReadFull(r.upr, p); err != nil {
				r.readFailed(err, false)
				return
			}
			r.touch()
			p = scrub.ScrubBody(p) // a whole message: its tail as an answer's
			text := p
			if h.Opcode == wsframe.OpClose && len(p) >= 2 {
				text = p[2:] // the reason: the status code is not text a client reads on from
			}
			if _, hit := cross.Next(text); hit || scrub.ContainsDecoded(p) || len(p) > wsframe.MaxControlPayload {
				r.end(wsEcho, wire.Errorf(egressdapi.CodeResponseAborted, "an upstream control frame holds a credential value"), wsframe.ClosePolicy)
				return
			}
			if !r.writeClient(wsframe.Header{Fin: true, Opcode: h.Opcode}, p) {
				return
			}
			if h.Opcode == wsframe.OpClose {
				r.st.End(wsClosed, nil)
			}
			continue
		}
		if (h.Opcode == wsframe.OpContinuation) != (sc != nil) {
			r.end(wsProtocol, wire.Errorf(egressdapi.CodeUpstreamError, "an upstream continuation frame out of place"), wsframe.CloseProtocolError)
			return
		}
		if sc == nil {
			sc, opcode = r.c.s.cfg.Pipeline.NewScrubber(), h.Opcode
		}
		// The payload, read in pieces, each scrubbed as it arrives.
		for left := h.Length; left > 0; {
			piece := make([]byte, min(left, 32<<10))
			if _, err := io.ReadFull(r.upr, piece); err != nil {
				r.readFailed(err, false)
				return
			}
			left -= int64(len(piece))
			r.touch()
			if out, err = sc.Next(out[:0], piece); err != nil {
				r.echo(opcode, out)
				return
			}
			if _, hit := cross.Next(out); hit {
				r.echo(opcode, nil)
				return
			}
			if len(out) > 0 {
				if !r.writeClient(wsframe.Header{Opcode: opcode}, out) {
					return
				}
				opcode = wsframe.OpContinuation
			}
		}
		if !h.Fin {
			continue
		}
		if out, err = sc.Close(out[:0]); err != nil {
			r.echo(opcode, out)
			return
		}
		if _, hit := cross.Next(out); hit {
			r.echo(opcode, nil)
			return
		}
		if !r.writeClient(wsframe.Header{Fin: true, Opcode: opcode}, out) {
			return
		}
		sc = nil
	}
}

// echo ends the connection on an upstream message that holds a value in
// a form that cannot be removed in place: what was released before it
// goes out, then 1008.
func (r *wsRelay) echo(opcode byte, out []byte) {
	if len(out) > 0 {
		r.writeClient(wsframe.Header{Opcode: opcode}, out)
	}
	r.end(wsEcho, wire.Errorf(egressdapi.CodeResponseAborted, "an upstream message holds a credential value in a form that cannot be removed in place"), wsframe.ClosePolicy)
}

// readFailed ends the relay after a failed read from the client
// (fromClient) or the upstream.
func (r *wsRelay) readFailed(err error, fromClient bool) {
	switch {
	case errors.Is(err, wsframe.ErrMalformed):
		code := egressdapi.CodeInvalidRequest
		if !fromClient {
			code = egressdapi.CodeUpstreamError
		}
		r.end(wsProtocol, wire.Errorf(code, "a malformed WebSocket frame"), wsframe.CloseProtocolError)
	case errors.Is(err, wsframe.ErrTooLarge):
		r.end(wsTooBig, wire.Errorf(egressdapi.CodeTooLarge, "a WebSocket frame is larger than %d bytes", r.c.s.cfg.MaxBody), wsframe.CloseTooBig)
	default:
		r.end(wsClosed, nil, 0) // a side closed its connection
	}
}

// writeClient writes one unmasked frame to the client and reports
// whether it went.
func (r *wsRelay) writeClient(h wsframe.Header, p []byte) bool {
	select {
	case <-r.st.Dropped():
		// The bundle's values were unregistered: p may have been scrubbed
		// without them (the watch ends the relay).
		return false
	default:
	}
	return r.writeClientFrame(h, p)
}

// writeClientFrame is writeClient without the drop check (end's close
// frame, whose payload is egressd's own).
func (r *wsRelay) writeClientFrame(h wsframe.Header, p []byte) bool {
	r.clMu.Lock()
	defer r.clMu.Unlock()
	h.Length = int64(len(p))
	r.c.writeBy(r.c.s.cfg.ExchangeIdle)
	bw := r.c.w()
	bw.Write(wsframe.AppendHeader(bw.AvailableBuffer(), h))
	bw.Write(p)
	if err := r.c.flush(); err != nil {
		go r.end(wsClientGone, clientGone(err), 0)
		return false
	}
	r.st.Count(0, uint64(len(p)))
	r.touch()
	return true
}

// writeUpstream writes one frame to the upstream, masked with a fresh
// key (RFC 6455 section 5.3), and reports whether it went.
func (r *wsRelay) writeUpstream(h wsframe.Header, p []byte) bool {
	r.upMu.Lock()
	defer r.upMu.Unlock()
	h.Masked, h.Length = true, int64(len(p))
	_, _ = rand.Read(h.Mask[:])
	frame := wsframe.AppendHeader(make([]byte, 0, 14+len(p)), h)
	start := len(frame)
	frame = append(frame, p...)
	wsframe.MaskBytes(h.Mask, 0, frame[start:])
	if _, err := r.up.Write(frame); err != nil {
		go r.end(wsClosed, nil, 0)
		return false
	}
	r.touch()
	return true
}
