package pipeline

import (
	"context"
	"io"
	"log/slog"
	"time"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/wire"
)

// OpRequest is the op name in audit records.
const OpRequest = "egress.request"

// Do runs one request through every step and returns the answer with
// its body read whole (at most MaxBuffered bytes: the buffered op answers
// in one frame). Refusals are typed errors with the codes of
// lib/api/egressdapi; the error's Msg never holds a value.
func (p *Pipeline) Do(ctx context.Context, in Input) (*Output, error) {
	st, err := p.DoStream(ctx, in)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	max := p.cfg.MaxBuffered
	body, err := io.ReadAll(io.LimitReader(st, int64(max)+1))
	if err == nil && len(body) > max {
		err = wire.Errorf(egressdapi.CodeResponseTooLarge, "response body is larger than %d bytes, the most a buffered answer carries in one frame; the proxy face streams larger ones", max)
		st.fail(err)
	}
	if err != nil {
		return nil, err
	}
	return &Output{Status: st.Status, Header: st.Header, Body: body}, nil
}

// refuse records a refusal: one audit record, one refused count.
func (p *Pipeline) refuse(ctx context.Context, d *decision, b *bundle.Bundle, err error) error {
	if b != nil {
		b.AddRefused()
	}
	outcome := audit.OutcomeRefused
	if wire.CodeOf(err) == wire.CodeInternal {
		outcome = audit.OutcomeError
	}
	if _, aerr := p.cfg.Audit.Append(context.WithoutCancel(ctx), d.record(outcome, wire.CodeOf(err))); aerr != nil {
		p.cfg.Logger.Error("audit.append_failed", slog.String("op", OpRequest), slog.Any("err", aerr))
	}
	return err
}

// decision collects what the log line and the audit records say about one
// request.
type decision struct {
	in       Input
	start    time.Time
	rec      *request.Record
	origin   string // rec's origin, formatted once
	route    transport.Route
	address  string // route.Addr, formatted once
	owners   []uint32
	creds    []string
	credsVal slog.Value // creds, boxed (attrs)
	credBuf  [2]string  // creds' storage for the usual one or two
	status   int
	bytesOut uint64
	bytesIn  uint64
	sent     bool
	attrBuf  [12]slog.Attr // attrs' storage
}

// Log field names of the `egress.decision` line and audit fields.
const (
	KeyInvocation  = "invocation"
	KeyMethod      = "method"
	KeyOrigin      = "origin"
	KeyPath        = "path"
	KeyAddress     = "address"
	KeyCredentials = "attached"
	KeyOwners      = "listener_uids"
	KeyDecision    = "decision"
	KeyReason      = "reason"
	KeyStatus      = "status"
	KeyBytesOut    = "bytes_out"
	KeyBytesIn     = "bytes_in"
	KeyDurationMS  = "duration_ms"
	KeyCorr        = "corr"
)

// ReasonOK is the reason of an allowed request; every other reason is the
// refusal's error code.
const ReasonOK = "ok"

// attrs returns the decision's audit fields so far, as typed values
// sorted by key (the order lib/audit writes them in, so it has nothing to
// sort), in d's buffer: the before and the after record each take a fresh
// set, and lib/audit keeps neither. The proxy face's fields (Input.Fields)
// go in the record's Fields next to them.
func (d *decision) attrs() []slog.Attr {
	a := d.attrBuf[:0]
	if d.address != "" {
		a = append(a, slog.String(KeyAddress, d.address))
	}
	if len(d.creds) > 0 {
		a = append(a, slog.Attr{Key: KeyCredentials, Value: d.credsVal})
	}
	a = append(a, slog.Uint64(KeyBytesIn, d.bytesIn), slog.Uint64(KeyBytesOut, d.bytesOut),
		slog.Int64(KeyDurationMS, time.Since(d.start).Milliseconds()), slog.String(KeyInvocation, d.in.Invocation))
	if len(d.owners) > 0 {
		a = append(a, slog.Any(KeyOwners, d.owners))
	}
	a = append(a, slog.String(KeyMethod, d.in.Method))
	if d.rec != nil {
		a = append(a, slog.String(KeyOrigin, d.origin), slog.String(KeyPath, d.rec.Path))
	}
	if d.status != 0 {
		a = append(a, slog.Int(KeyStatus, d.status))
	}
	return a
}

func (d *decision) record(outcome audit.Outcome, code string) audit.Record {
	return audit.Record{Actor: d.in.Actor, Op: OpRequest, Outcome: outcome, Code: code, Corr: d.in.Corr, Fields: d.in.Fields, Attrs: d.attrs()}
}

// finish logs the one canonical decision line.
func (d *decision) finish(p *Pipeline, err error) {
	verdict, reason := "allow", ReasonOK
	if err != nil {
		verdict, reason = "deny", wire.CodeOf(err)
		if d.sent {
			verdict = "error"
		}
	}
	ctx := context.Background()
	h := p.cfg.Logger.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	var arr [14]slog.Attr
	attrs := append(arr[:0], slog.String(KeyDecision, verdict), slog.String(KeyReason, reason),
		slog.String(KeyInvocation, d.in.Invocation), slog.String(KeyMethod, d.in.Method))
	if d.rec != nil {
		attrs = append(attrs, slog.String(KeyOrigin, d.origin), slog.String(KeyPath, d.rec.Path))
	}
	if d.address != "" {
		attrs = append(attrs, slog.String(KeyAddress, d.address))
	}
	attrs = append(attrs, slog.Int(KeyCredentials, len(d.creds)), slog.Int(KeyStatus, d.status),
		slog.Uint64(KeyBytesOut, d.bytesOut), slog.Uint64(KeyBytesIn, d.bytesIn),
		slog.Int64(KeyDurationMS, time.Since(d.start).Milliseconds()))
	if d.in.Corr != "" {
		attrs = append(attrs, slog.String(KeyCorr, d.in.Corr))
	}
	// Straight to the handler, as Logger.LogAttrs would go, without the
	// caller's PC (no handler here prints a source).
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "egress.decision", 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r)
}
