package proxy

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/wire"
)

// HeaderError carries the error code of a refusal to the client; egressd
// strips it from upstream responses (request.ReservedPrefix), so a client
// can trust it.
const HeaderError = "X-Hostkit-Error"

// Op names of the proxy face's own audit records (requests themselves are
// pipeline.OpRequest).
const (
	OpAuth    = "egress.proxy_auth"
	OpConnect = "egress.connect"
)

// statusError gives a refusal an HTTP status other than its code's.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// misdirected marks err as a 421 (RFC 9110 §15.5.20).
func misdirected(err error) error {
	return &statusError{status: http.StatusMisdirectedRequest, err: err}
}

// timedOut marks err as a 408 (RFC 9110 §15.5.9): the client was too
// slow, not the upstream.
func timedOut(err error) error {
	return &statusError{status: http.StatusRequestTimeout, err: err}
}

// Status returns the HTTP status a refusal with err's code gets.
func Status(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	switch wire.CodeOf(err) {
	case wire.CodePeerDenied:
		return http.StatusProxyAuthRequired
	case egressdapi.CodeInvalidRequest, egressdapi.CodeHeaderInvalid, egressdapi.CodeInjectionConflict, egressdapi.CodeInjectionFailed, egressdapi.CodeTransparentRefused:
		return http.StatusBadRequest
	case egressdapi.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case egressdapi.CodeUpstreamError, egressdapi.CodeResponseTooLarge, egressdapi.CodeResponseUndecodable, egressdapi.CodeResponseAborted:
		return http.StatusBadGateway
	case egressdapi.CodeTimeout:
		return http.StatusGatewayTimeout
	case wire.CodeServerBusy, egressdapi.CodeUnavailable:
		return http.StatusServiceUnavailable
	case wire.CodeInternal:
		return http.StatusInternalServerError
	}
	return http.StatusForbidden
}

// refuse writes a refusal: a short text reason and the code in
// X-Hostkit-Error (407 adds a Basic challenge). It does not audit: the
// pipeline did, or reject does.
func (c *conn) refuse(err error, closeAfter bool) {
	we := wire.AsError(err)
	status := Status(err)
	msg := c.s.cfg.Registry.Scrubber().Scrub(we.Msg)
	body := []byte("egressd: " + we.Code + ": " + msg + "\n")
	h := make([]request.Field, 0, 3) // sorted by name, as writeResponse wants
	h = append(h, request.Field{Name: "Content-Type", Value: "text/plain; charset=utf-8"})
	if status == http.StatusProxyAuthRequired {
		h = append(h, request.Field{Name: "Proxy-Authenticate", Value: `Basic realm="hostkit egressd"`})
	}
	if we.Code == egressdapi.CodeUnavailable {
		h = append(h, request.Field{Name: "Retry-After", Value: "1"}) // RFC 9110 §10.2.3: seconds
	}
	h = append(h, request.Field{Name: HeaderError, Value: we.Code})
	c.write("", status, h, body, closeAfter)
}

// reject audits a refusal the pipeline did not see (authentication,
// CONNECT, a misdirected or malformed request), counts it against b when
// known, logs the decision line, and writes it.
//
// A refusal without a bundle (nothing authenticated yet: any local process
// can cause one) is recorded at most Config.AuthAuditRate times a second;
// past that it is answered as always and counted into the next such record.
func (c *conn) reject(b *bundle.Bundle, err error, closeAfter bool, op string, fields map[string]any) {
	c.recordRefusal(b, err, op, fields)
	c.refuse(err, closeAfter)
}

// recordRefusal is reject without the answer (for a refusal that cannot
// be answered in HTTP, such as a TLS server name): the audit record
// (bounded without a bundle), the refused count and the decision line.
func (c *conn) recordRefusal(b *bundle.Bundle, err error, op string, fields map[string]any) {
	if b == nil && !c.s.authAudit.Allow() {
		c.s.authSuppressed.Add(1)
		return
	}
	if fields == nil {
		fields = map[string]any{}
	}
	if b == nil {
		if n := c.s.authSuppressed.Swap(0); n > 0 {
			fields[keySuppressed] = n
		}
	}
	for k, v := range fields {
		if s, ok := v.(string); ok {
			fields[k] = audit.Clip(s, maxAuditField)
		}
	}
	fields["via"] = c.via
	inv := ""
	if b != nil {
		b.AddRefused()
		inv = b.Invocation
		fields[pipeline.KeyInvocation] = inv
	}
	if c.tunnel != nil {
		fields["tunnel"] = c.tunnel.authority()
	}
	code := wire.CodeOf(err)
	if _, aerr := c.s.cfg.Audit.Append(context.WithoutCancel(c.s.ctx), audit.Record{Actor: c.actor, Op: op,
		Outcome: audit.OutcomeRefused, Code: code, Fields: fields}); aerr != nil {
		c.s.cfg.Logger.Error("audit.append_failed", slog.String("op", op), slog.Any("err", aerr))
	}
	c.s.cfg.Logger.Info("egress.decision", slog.String(pipeline.KeyDecision, "deny"), slog.String(pipeline.KeyReason, code),
		slog.String(pipeline.KeyInvocation, inv), slog.String("op", op), slog.String("via", c.via))
}

// auth returns the bundle that req's Proxy-Authorization names, checking
// its proxy token in constant time; without the header it returns the
// anonymous bundle when the operator enabled one. Failures are
// peer.denied (407) in an *authError whose audit fields say why, never
// the token.
func (c *conn) auth(req *http.Request) (*bundle.Bundle, error) {
	why, inv := "", ""
	b, err := func() (*bundle.Bundle, error) {
		h := req.Header.Get("Proxy-Authorization")
		if h == "" {
			if c.s.cfg.Anonymous != nil {
				return c.s.cfg.Anonymous, nil
			}
			why = "missing"
			return nil, errDenied
		}
		user, tok := c.authUser, c.authTok
		if h != c.authHeader {
			scheme, cred, _ := strings.Cut(h, " ")
			dec, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
			u, t, ok := strings.Cut(string(dec), ":")
			if !strings.EqualFold(scheme, "Basic") || derr != nil || !ok || !bundle.ValidInvocation(u) {
				why = "malformed"
				return nil, errDenied
			}
			user, tok = u, t
		}
		inv = user
		b, gerr := c.s.cfg.Registry.Get(user)
		if gerr != nil && c.s.inGrace() {
			// egressd started moments ago and forgot every bundle: the
			// invocation's stager is likely re-registering it now.
			why = "unknown_invocation"
			return nil, errUnavailable
		}
		if gerr != nil {
			why = "unknown_invocation"
			return nil, errDenied
		}
		if !b.CheckToken(tok) {
			why = "bad_token"
			return nil, errDenied
		}
		// The next request on this connection usually sends the same
		// header: it is then not decoded again (the bundle and token are
		// still checked each time).
		c.authHeader, c.authUser, c.authTok = h, user, tok
		return b, nil
	}()
	if err != nil {
		return nil, &authError{err: err, fields: map[string]any{"why": why, "claimed": inv, pipeline.KeyMethod: req.Method}}
	}
	return b, nil
}

// keySuppressed counts, in a refusal record without an invocation, the
// refusals without one before it that were not audited
// (Config.AuthAuditRate).
const keySuppressed = "suppressed"

// maxAuditField bounds, in bytes, each string field of a refusal the proxy
// face records before the pipeline (a method, a CONNECT target, a claimed
// invocation): what the client sent may be as long as the header limit,
// and such records can be written without a token.
const maxAuditField = 256

// authError is a failed authentication with its audit fields.
type authError struct {
	err    error
	fields map[string]any
}

func (e *authError) Error() string { return e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

// rejectErr audits and writes a refusal from before the pipeline.
func (c *conn) rejectErr(b *bundle.Bundle, req *http.Request, err error, closeAfter bool) {
	var ae *authError
	if errors.As(err, &ae) {
		c.reject(nil, ae.err, closeAfter, OpAuth, ae.fields)
		return
	}
	c.reject(b, err, closeAfter, pipeline.OpRequest, map[string]any{pipeline.KeyMethod: req.Method})
}

// errUnavailable answers an unknown invocation during ReregisterGrace
// (503 with Retry-After: 1).
var errUnavailable = &wire.Error{Code: egressdapi.CodeUnavailable, Retry: wire.RetrySafe,
	Msg: "egressd restarted moments ago and does not know this invocation yet; retry in a second"}

var errDenied = wire.Errorf(wire.CodePeerDenied, "proxy authentication required: Proxy-Authorization: Basic base64(invocation:proxy_token)")
