package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// connect handles CONNECT host:port (RFC 9110 §9.3.6): authentication,
// policy on the canonical authority, routing (egressd's own listeners are
// refused), the tunnel limit, then an opaque tunnel for an invocation
// without credentials or interception for one with credentials.
func (c *conn) connect(req *http.Request) {
	b, err := c.auth(req)
	if err != nil {
		c.rejectErr(nil, req, err, true)
		return
	}
	// The target and the Host field, as sent, before anything reads,
	// records, resolves or dials them: a held value in a name (policy may
	// allow any label of a domain) would leave in DNS and at the upstream.
	err = c.s.cfg.Pipeline.ScanHostName(req.RequestURI)
	if err == nil && c.host != req.RequestURI {
		err = c.s.cfg.Pipeline.ScanHostName(c.host)
	}
	if err != nil {
		c.rejectConnect(b, redact.Redacted, err)
		return
	}
	host, port, err := netguard.SplitHostPort(req.RequestURI)
	if err == nil && port == 0 {
		err = wire.Errorf(egressdapi.CodeInvalidRequest, "CONNECT needs host:port")
	}
	if err != nil {
		c.rejectConnect(b, req.RequestURI, wire.Wrap(egressdapi.CodeInvalidRequest, "CONNECT target is not a valid host:port", err))
		return
	}
	if err := c.s.cfg.Pipeline.ScanHostName(host); err != nil { // canonical (IDNA may map a spelling)
		c.rejectConnect(b, redact.Redacted, err)
		return
	}
	t := newTunnel(b, host, port)
	if t.transparent, err = c.transparentMode(req); err != nil {
		c.rejectConnect(b, t.authority(), err)
		return
	}
	c.transparent = t.transparent
	switch t.transparent {
	case egressdapi.TransparentHTTP:
		c.transparentHTTP(t)
		return
	case egressdapi.TransparentOther:
		c.transparentRaw(t)
		return
	}
	o := netguard.Origin{Scheme: netguard.SchemeHTTPS, Host: host, Port: port}
	if port == netguard.DefaultPort(netguard.SchemeHTTPS) {
		o.Port = 0
	}
	// An invocation with credentials gets no opaque tunnel at all; nor does
	// any invocation to the destination of a credential egressd holds for
	// another, where a stored value could be read back: both are
	// intercepted, so every answer is scrubbed.
	own := b.HasCredentials()
	intercept := own || c.s.cfg.Registry.IsDestination(o)
	if (own && !b.AllowsOrigin(o)) || (!own && !b.Allows(o, http.MethodConnect)) {
		c.rejectConnect(b, t.authority(), wire.Errorf(egressdapi.CodePolicyDenied, "CONNECT %s is not allowed for this invocation", t.authority()))
		return
	}
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.DialTimeout)
	defer cancel()
	r, err := c.s.cfg.Transport.Route(ctx, host, port)
	if err != nil {
		c.rejectConnect(b, t.authority(), err)
		return
	}
	release, ok := c.takeTunnel(t)
	if !ok {
		return
	}
	defer release()
	if intercept {
		c.intercept(t, r)
		return
	}
	c.opaque(t, r, t.transparent == egressdapi.TransparentTLS)
}

// takeTunnel takes one of the server's tunnels and one of t's
// invocation's, or refuses the CONNECT (server.busy) and reports false.
func (c *conn) takeTunnel(t *tunnel) (release func(), ok bool) {
	select {
	case c.s.tunnels <- struct{}{}:
	default:
		c.rejectConnect(t.b, t.authority(), wire.Errorf(wire.CodeServerBusy, "too many tunnels (at most %d)", c.s.cfg.MaxTunnels))
		return nil, false
	}
	if !c.s.invTunnels.take(t.b.Invocation) {
		<-c.s.tunnels
		c.rejectConnect(t.b, t.authority(), wire.Errorf(wire.CodeServerBusy, "too many tunnels for this invocation (at most %d)", c.s.cfg.MaxTunnelsPerInvocation))
		return nil, false
	}
	return func() { c.s.invTunnels.give(t.b.Invocation); <-c.s.tunnels }, true
}

func (c *conn) rejectConnect(b *bundle.Bundle, authority string, err error) {
	f := map[string]any{pipeline.KeyOrigin: authority}
	if c.transparent != "" {
		f[keyTransparent] = c.transparent
	}
	c.reject(b, err, true, OpConnect, f)
}

// established answers a CONNECT with 200 (no body, no Content-Length:
// RFC 9110 §9.3.6).
func (c *conn) established() bool {
	c.writeBy(c.s.cfg.ExchangeIdle)
	c.w().WriteString("HTTP/1.1 200 Connection established\r\n\r\n")
	return c.flush() == nil
}

// intercept terminates TLS with a leaf for the CONNECT host and serves the
// requests inside, HTTP/2 when the client chose it in ALPN and HTTP/1.1
// otherwise; each goes through the pipeline, bound to the CONNECT
// authority.
func (c *conn) intercept(t *tunnel, r transport.Route) {
	leaf, err := c.s.cfg.CA.Leaf(t.host)
	if err != nil {
		c.rejectConnect(t.b, t.authority(), wire.Wrap(wire.CodeInternal, "cannot issue a certificate", err))
		return
	}
	c.tunnelRecord(t, "intercept", r, audit.OutcomeOK, nil)
	if !c.established() {
		return
	}
	var refused error // the server name's refusal, when it had one
	// The TLS layer reads the socket (after what c's reader holds); c
	// reads nothing more.
	raw := &bufConn{Conn: c.c, r: c.br, pool: &c.s.bufs}
	c.br = nil
	tc := tls.Server(raw, &tls.Config{
		Certificates: []tls.Certificate{*leaf}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if refused = c.checkServerName(t, hello.ServerName); refused != nil {
				return nil, errServerName
			}
			return nil, nil
		},
	})
	c.setDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	// The handshake runs on a goroutine of its own: its key exchange and
	// signature grow a stack to tens of KiB, and on the goroutine that
	// then serves the tunnel (for as long as its streams stay open) that
	// stack would stay until collections shrank it, one halving each.
	hs := make(chan error, 1)
	go func() { hs <- tc.HandshakeContext(c.s.ctx) }()
	if err := <-hs; err != nil {
		if refused != nil {
			c.recordRefusal(t.b, refused, OpConnect, map[string]any{pipeline.KeyOrigin: t.authority(), "mode": "intercept"})
			return
		}
		c.s.cfg.Logger.Info("proxy.tls_handshake_failed", slog.String(pipeline.KeyInvocation, t.b.Invocation),
			slog.String(pipeline.KeyOrigin, t.authority()), slog.String("err", err.Error()))
		return
	}
	c.setDeadline(time.Time{}) // the inner conn sets its own, on the same socket
	inner := newConn(c.s, tc, c.via, c.actor)
	inner.tunnel, inner.raw = t, raw
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		inner.serveH2()
	} else {
		inner.serve()
	}
	_ = tc.Close()
}

// errServerName ends a handshake whose server name was refused (the
// alert the client gets; the reason is in the audit record).
var errServerName = errors.New("proxy: TLS server name refused")

// checkServerName checks the server name (SNI, RFC 6066 section 3) of a
// ClientHello inside an intercepted tunnel: it must hold no held value
// (egress.secret_in_request) and, when sent, name the CONNECT host
// (egress.invalid_request): egressd answers with a leaf for that host
// and sends every request inside to it, so another name is either a
// mistake or a channel. Without a name (a client that connects to an
// address) there is nothing to check.
func (c *conn) checkServerName(t *tunnel, name string) error {
	if name == "" {
		return nil
	}
	if err := c.s.cfg.Pipeline.ScanHostName(name); err != nil {
		return err
	}
	same := false
	if a, err := netip.ParseAddr(name); err == nil {
		ta, ok := netguard.HostAddr(t.host)
		same = ok && ta == a.Unmap()
	} else if host, port, err := c.s.cfg.Pipeline.SplitHostPort(name); err == nil && port == 0 {
		same = host == t.host
	}
	if !same {
		return wire.Errorf(egressdapi.CodeInvalidRequest, "the TLS server name names another host than the CONNECT")
	}
	return nil
}

// tunnelRecord writes the audit record of an accepted CONNECT.
func (c *conn) tunnelRecord(t *tunnel, mode string, r transport.Route, outcome audit.Outcome, extra map[string]any) {
	f := map[string]any{pipeline.KeyInvocation: t.b.Invocation, pipeline.KeyOrigin: t.authority(), "mode": mode,
		pipeline.KeyAddress: r.Addr.String(), "via": c.via}
	if t.transparent != "" {
		f[keyTransparent] = t.transparent
	}
	for k, v := range extra {
		f[k] = v
	}
	if _, err := c.s.cfg.Audit.Append(context.WithoutCancel(c.s.ctx), audit.Record{Actor: c.actor, Op: OpConnect, Outcome: outcome, Fields: f}); err != nil {
		c.s.cfg.Logger.Error("audit.append_failed", slog.String("op", OpConnect), slog.Any("err", err))
	}
	c.s.cfg.Logger.Info("egress.tunnel", slog.String(pipeline.KeyInvocation, t.b.Invocation), slog.String(pipeline.KeyOrigin, t.authority()),
		slog.String("mode", mode), slog.String(pipeline.KeyAddress, r.Addr.String()), slog.Any("counts", extra))
}

// opaque dials exactly the checked address and copies bytes both ways
// until both sides are done, the tunnel is idle for IdleTimeout, or the
// invocation's bundle is dropped (both connections are closed then).
// Client-to-upstream bytes count as network_egress_bytes as they pass.
//
// With checkName (a transparent TLS connection) the client's ClientHello
// is read first and its server name checked as an intercepted tunnel
// checks it; a refused name ends the tunnel before anything is dialled.
func (c *conn) opaque(t *tunnel, r transport.Route, checkName bool) {
	var hello []byte
	if checkName {
		if !c.established() {
			return
		}
		var ok bool
		if hello, ok = c.peekServerName(t); !ok {
			return
		}
	}
	up, err := c.dial(r.Addr)
	if err != nil {
		c.rejectConnect(t.b, t.authority(), wire.Wrap(egressdapi.CodeUpstreamError, "upstream connection failed", err))
		return
	}
	if !c.s.track(nil, up, false) {
		up.Close()
		return
	}
	defer c.s.untrack(nil, up)
	if checkName {
		up.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if _, err := up.Write(hello); err != nil {
			return
		}
		t.b.AddBytes(uint64(len(hello)))
	} else if !c.established() {
		return
	}
	t.b.AddRequest()
	start := time.Now()
	c.setDeadline(time.Time{})
	var last atomic.Int64
	var out, in atomic.Uint64
	var wg sync.WaitGroup
	idle := c.s.cfg.IdleTimeout
	raw := &bufConn{Conn: c.c, r: c.br, pool: &c.s.bufs}
	c.br = nil
	wg.Go(func() {
		pipe(up, raw, c.c, idle, &last, func(n int) { out.Add(uint64(n)); t.b.AddBytes(uint64(n)) })
	})
	wg.Go(func() { pipe(c.c, up, up, idle, &last, func(n int) { in.Add(uint64(n)) }) })
	// A dropped bundle reaches nothing, open tunnels included.
	var dropped atomic.Bool
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-t.b.Dropped():
			dropped.Store(true)
			up.Close()
			c.c.Close()
		case <-stop:
		}
	}()
	wg.Wait()
	close(stop)
	<-watched
	fields := map[string]any{pipeline.KeyBytesOut: out.Load(), pipeline.KeyBytesIn: in.Load(),
		pipeline.KeyDurationMS: time.Since(start).Milliseconds()}
	if dropped.Load() {
		fields[keyEndedBy] = "bundle.drop"
	}
	c.tunnelRecord(t, "tunnel", r, audit.OutcomeOK, fields)
}

// keyEndedBy names, in an opaque tunnel's audit record, what closed it
// when egressd did: "bundle.drop" when its invocation's bundle was dropped.
const keyEndedBy = "ended_by"

// dial connects to exactly addr; ControlContext refuses any other.
func (c *conn) dial(addr netip.AddrPort) (net.Conn, error) {
	d := &net.Dialer{Timeout: c.s.cfg.DialTimeout, KeepAlive: 30 * time.Second,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			if got, err := netip.ParseAddrPort(address); err != nil || got != addr {
				return fmt.Errorf("proxy: refusing to connect to %s, checked %s", address, addr)
			}
			return nil
		}}
	return d.DialContext(c.s.ctx, "tcp", addr.String())
}

// pipe copies src to dst, refreshing an idle deadline shared by both
// directions (so a long download does not time out its quiet upload
// side), then half-closes dst, or closes both when dst cannot half-close.
func pipe(dst net.Conn, src interface{ Read([]byte) (int, error) }, srcConn net.Conn, idle time.Duration, last *atomic.Int64, count func(int)) {
	buf := make([]byte, 64<<10)
	for {
		_ = srcConn.SetReadDeadline(time.Now().Add(idle))
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			_ = dst.SetWriteDeadline(time.Now().Add(idle))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
			count(n)
		}
		if err != nil {
			if isTimeout(err) && time.Since(time.Unix(0, last.Load())) < idle {
				continue
			}
			break
		}
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		return
	}
	dst.Close()
	srcConn.Close()
}
