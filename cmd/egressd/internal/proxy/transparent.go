package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// Transparent connections (docs/egressd.md, "Transparent connections"):
// the bridge of an isolated instance redirects every outbound TCP
// connection of the agent's namespace to itself and relays it here as a
// CONNECT to the name the agent resolved (or the literal address it
// dialled), with egressdapi.HeaderTransparent saying what its first bytes
// were. TLS is decided exactly as a proxied CONNECT; plain HTTP is served
// as plain-HTTP proxy requests; anything else needs a tcp:// rule.

// keyTransparent names, in audit records of a transparent connection and
// the requests inside it, what the bridge peeked: tls, http or other.
const keyTransparent = "transparent"

// transparentMode returns req's HeaderTransparent value ("" without
// one). Errors: egress.transparent_refused off the Unix socket (any local
// process can reach the TCP listener; only a bridge, which dials the
// socket, relays redirected connections) or for an unknown value.
func (c *conn) transparentMode(req *http.Request) (string, error) {
	vs, ok := req.Header[egressdapi.HeaderTransparent]
	if !ok {
		return "", nil
	}
	if c.via != "unix" {
		return "", wire.Errorf(egressdapi.CodeTransparentRefused, "the %s header is accepted only on the Unix proxy socket", egressdapi.HeaderTransparent)
	}
	if len(vs) == 1 {
		switch vs[0] {
		case egressdapi.TransparentTLS, egressdapi.TransparentHTTP, egressdapi.TransparentOther:
			return vs[0], nil
		}
	}
	return "", wire.Errorf(egressdapi.CodeTransparentRefused, "%s must be one of tls, http, other", egressdapi.HeaderTransparent)
}

// transparentHTTP serves a transparent plain-HTTP connection: 200, then
// every request on it as a plain-HTTP proxy request to
// http://host[:port] (its origin-form target made absolute, its Host
// required to name the same authority), so the pipeline decides policy,
// substitution and the plaintext rules per request as it does for an
// absolute-form http:// request. Nothing is resolved or dialled before
// the pipeline allows a request.
func (c *conn) transparentHTTP(t *tunnel) {
	pt := newSchemeTunnel(t.b, netguard.SchemeHTTP, t.host, t.port)
	pt.transparent = t.transparent
	release, ok := c.takeTunnel(pt)
	if !ok {
		return
	}
	defer release()
	c.record(pt, "http", nil)
	if !c.established() {
		return
	}
	raw := &bufConn{Conn: c.c, r: c.br, pool: &c.s.bufs}
	c.br = nil
	c.setDeadline(time.Time{}) // the inner conn sets its own
	inner := newConn(c.s, raw, c.via, c.actor)
	inner.tunnel = pt
	inner.serve()
}

// transparentRaw decides a transparent connection that is neither TLS
// nor HTTP: an opaque tunnel only when the policy has tcp://host:port for
// it, the invocation holds no credential and no held credential's
// destination is that authority (its bytes could carry a value read
// back); else egress.raw_tcp_denied.
func (c *conn) transparentRaw(t *tunnel) {
	o := netguard.Origin{Scheme: netguard.SchemeTCP, Host: t.host, Port: t.port}
	dest := netguard.Origin{Scheme: netguard.SchemeHTTPS, Host: t.host, Port: t.port}
	if dest.Port == netguard.DefaultPort(netguard.SchemeHTTPS) {
		dest.Port = 0
	}
	switch {
	case t.b.HasCredentials():
		c.rejectConnect(t.b, t.authority(), wire.Errorf(egressdapi.CodeRawTCPDenied, "a raw TCP connection from an invocation holding credentials"))
		return
	case c.s.cfg.Registry.IsDestination(dest) || !t.b.Allows(o, http.MethodConnect):
		c.rejectConnect(t.b, t.authority(), wire.Errorf(egressdapi.CodeRawTCPDenied, "a raw TCP connection to %s needs the policy rule %s", t.authority(), o))
		return
	}
	r, err := c.route(t)
	if err != nil {
		c.rejectConnect(t.b, t.authority(), err)
		return
	}
	release, ok := c.takeTunnel(t)
	if !ok {
		return
	}
	defer release()
	c.opaque(t, r, false)
}

// route resolves and checks t's authority within DialTimeout.
func (c *conn) route(t *tunnel) (transport.Route, error) {
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.cfg.DialTimeout)
	defer cancel()
	return c.s.cfg.Transport.Route(ctx, t.host, t.port)
}

// record writes the audit record of an accepted transparent connection
// that has no upstream address yet.
func (c *conn) record(t *tunnel, mode string, extra map[string]any) {
	f := map[string]any{pipeline.KeyInvocation: t.b.Invocation, pipeline.KeyOrigin: t.base, "mode": mode, "via": c.via,
		keyTransparent: t.transparent}
	for k, v := range extra {
		f[k] = v
	}
	if _, err := c.s.cfg.Audit.Append(c.s.ctx, audit.Record{Actor: c.actor, Op: OpConnect, Outcome: audit.OutcomeOK, Fields: f}); err != nil {
		c.s.cfg.Logger.Error("audit.append_failed", slog.String("op", OpConnect), slog.Any("err", err))
	}
}

// errHelloRead ends the handshake peekServerName starts once the
// ClientHello has been read.
var errHelloRead = errors.New("proxy: ClientHello read")

// peekServerName reads the client's ClientHello (through crypto/tls, which
// parses it and stops at GetConfigForClient, writing nothing back) within
// HandshakeTimeout and checks its server name as checkServerName does. It
// returns every byte read, to be sent on as they came, and reports false
// when the tunnel must end: a refused name (audited) or no ClientHello.
func (c *conn) peekServerName(t *tunnel) ([]byte, bool) {
	rec := &helloConn{Conn: c.c, r: &bufConn{Conn: c.c, r: c.br}}
	var name string
	var seen bool
	tc := tls.Server(rec, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, seen = h.ServerName, true
		return nil, errHelloRead
	}})
	c.setDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	err := tc.HandshakeContext(c.s.ctx)
	c.setDeadline(time.Time{})
	if !seen {
		c.s.cfg.Logger.Info("proxy.tls_handshake_failed", slog.String(pipeline.KeyInvocation, t.b.Invocation),
			slog.String(pipeline.KeyOrigin, t.authority()), slog.String("err", errString(err)))
		return nil, false
	}
	if refused := c.checkServerName(t, name); refused != nil {
		c.recordRefusal(t.b, refused, OpConnect, map[string]any{pipeline.KeyOrigin: t.authority(), "mode": "tunnel", keyTransparent: t.transparent})
		return nil, false
	}
	return rec.got, true
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// helloConn records what is read through it and writes nothing (the
// alert crypto/tls would send after GetConfigForClient fails is dropped:
// the client's handshake goes on with the upstream).
type helloConn struct {
	net.Conn
	r   io.Reader
	got []byte
}

func (h *helloConn) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.got = append(h.got, p[:n]...)
	return n, err
}

func (h *helloConn) Write(p []byte) (int, error) { return len(p), nil }
