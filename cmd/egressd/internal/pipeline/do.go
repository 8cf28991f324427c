package pipeline

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/wire"
)

// OpRequest is the op name in audit records.
const OpRequest = "egress.request"

// Do runs one request through every step. Refusals are typed errors with
// the codes of lib/api/egressdapi; the error's Msg never holds a value.
func (p *Pipeline) Do(ctx context.Context, in Input) (*Output, error) {
	d := &decision{in: in, start: time.Now()}
	out, err := p.do(ctx, in, d)
	d.finish(p, err)
	return out, err
}

func (p *Pipeline) do(ctx context.Context, in Input, d *decision) (*Output, error) {
	b, err := in.Bundle, error(nil)
	if b == nil {
		if b, err = p.cfg.Registry.Get(in.Invocation); err != nil {
			return nil, p.refuse(ctx, d, nil, err)
		}
	}
	resolve, place := p.Resolve, p.Inject
	if in.Substitute {
		resolve, place = p.Placements, p.Substitute
	}
	if err := p.ScanHost(in, nil); err != nil { // as written: before a parse error could quote it
		return nil, p.refuse(ctx, d, b, err)
	}
	rec, err := p.Validate(in)
	if err != nil {
		return nil, p.refuse(ctx, d, b, err)
	}
	d.rec = rec
	if err := p.ScanHost(in, rec); err != nil {
		// The host holds a value: the record and the log line name the
		// origin without it.
		d.origin = redactedOrigin(rec)
		return nil, p.refuse(ctx, d, b, err)
	}
	d.origin = rec.OriginString()
	attach, err := resolve(b, rec)
	if err != nil {
		return nil, p.refuse(ctx, d, b, err)
	}
	if err := p.Policy(b, rec); err != nil {
		return nil, p.refuse(ctx, d, b, err)
	}
	if err := p.Scan(rec); err != nil {
		return nil, p.refuse(ctx, d, b, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	route, owners, err := p.Route(ctx, rec, attach)
	if err != nil {
		return nil, p.refuse(ctx, d, b, err)
	}
	d.route, d.owners, d.address = route, owners, route.Addr.String()
	sent, err := place(b, rec, attach)
	if err != nil {
		return nil, p.refuse(ctx, d, b, err)
	}
	d.creds = d.credBuf[:0]
	for _, c := range attach {
		d.creds = append(d.creds, c.Name)
	}
	if len(d.creds) > 0 {
		d.credsVal = slog.AnyValue(d.creds) // boxed once for both records
	}
	d.bytesOut = p.RequestBytes(sent)
	pair, err := p.cfg.Audit.Begin(ctx, d.record(audit.OutcomePending, ""))
	if err != nil {
		return nil, p.refuse(ctx, d, b, wire.Wrap(wire.CodeInternal, "audit log unavailable", err))
	}
	b.AddEgress(d.bytesOut)
	whole := p.cfg.Registry.IsDestination(rec.Origin())
	if whole {
		wholeOnly(sent)
	}
	resp, body, err := p.Send(ctx, sent, route)
	var out *Output
	if err == nil {
		d.status = resp.StatusCode
		if whole && resp.StatusCode == http.StatusPartialContent {
			err = errPartial()
		} else {
			out, err = p.Sanitize(resp, body)
		}
	}
	if out != nil {
		d.bytesIn = uint64(len(out.Body))
	}
	outcome := audit.OutcomeOK
	if err != nil {
		outcome = audit.OutcomeError
	}
	if _, aerr := pair.EndWith(context.WithoutCancel(ctx), outcome, wire.CodeOf(err), d.in.Fields, d.attrs()); aerr != nil {
		p.cfg.Logger.Error("audit.append_failed", slog.String("op", OpRequest), slog.Any("err", aerr))
	}
	d.sent = true
	return out, err
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
