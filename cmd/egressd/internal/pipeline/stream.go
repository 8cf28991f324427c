package pipeline

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/wire"
)

// Stream is an upstream answer on its way to the caller: the status and
// the sanitized header at once, the body as it arrives, scrubbed (Read).
// The caller must Close it; the after record, the decision line and the
// bundle's byte counts are written then. Read (or Next) and Close may be
// called from different goroutines, but Read and Next from one at a
// time.
type Stream struct {
	// Status is the upstream's status code.
	Status int
	// Header is the sanitized response header, sorted by name (repeats
	// kept in order), without Content-Length and the framing headers:
	// the body's length changes when a value is scrubbed out of it.
	Header []request.Field

	p      *Pipeline
	d      *decision
	b      *bundle.Bundle
	pair   audit.Pair
	resp   *http.Response
	conn   io.ReadWriteCloser // a 101 answer's upgraded connection
	up     *upload            // a request body that streams (nil: none, or sent whole)
	src    io.Reader          // resp.Body, or a gzip reader over it (lazily made)
	gz     bool
	sc     BodyScrubber
	ctx    context.Context // the exchange's: cancelled by its end, or by the caller with ErrClientGone
	cancel context.CancelFunc
	idle   *time.Timer  // after the header: no upstream byte for IdleTimeout
	total  *time.Timer  // TotalTimeout (nil: none)
	why    atomic.Value // string: what ended the exchange early (endIdle, endTotal, endClient)

	// Buffers (streambuf.go): a waiting stream holds only small and keep.
	small   *[]byte // the stream's upstream read buffer (smallRead bytes, pooled)
	big     *[]byte // a pooled read buffer, held while reads fill it
	bulk    bool    // the last upstream read returned smallRead bytes or more
	out     []byte  // scrubbed bytes not yet returned (out[off:])
	off     int
	outPool *[]byte // the pooled buffer out was built in, or nil
	keep    []byte  // the stream's own output slice, for small pieces

	err     error // the terminal error Read returns once out is drained (io.EOF at a clean end)
	n       int64 // decoded upstream body bytes read
	trailer []request.Field

	closeOnce sync.Once
	endCode   string // a failure set by Fail, for the after record
}

// What ended an exchange before its body did, in the after record's
// ended_by field.
const (
	endIdle   = "idle_timeout"
	endTotal  = "total_timeout"
	endClient = "client_closed"
	endEcho   = "echo"
	endCap    = "response_cap"
)

// KeyEndedBy names, in a request's after record, what ended it early.
const KeyEndedBy = "ended_by"

// ErrClientGone is the cause (context.WithCancelCause) with which a
// caller cancels DoStream's context when its client went away: the
// exchange is then recorded as egress.client_closed, ended_by
// client_closed.
var ErrClientGone = errors.New("pipeline: the client went away")

// DoStream runs one request through every step, as Do does, and returns
// the answer as soon as its header has arrived and been sanitized; the
// body follows through Stream.Read. A refusal before the first byte of
// the body (a policy, a scan, the upstream, a header that holds an echo)
// is an error here, audited as Do audits it.
func (p *Pipeline) DoStream(ctx context.Context, in Input) (*Stream, error) {
	d := &decision{in: in, start: time.Now()}
	st, err := p.doStream(ctx, in, d)
	if err != nil {
		d.finish(p, err)
		return nil, err
	}
	return st, nil
}

func (p *Pipeline) doStream(ctx context.Context, in Input, d *decision) (*Stream, error) {
	b, rec, attach, err := p.prepare(ctx, in, d)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	st := &Stream{p: p, d: d, b: b, ctx: rctx, cancel: cancel}
	if p.cfg.TotalTimeout > 0 {
		st.total = time.AfterFunc(p.cfg.TotalTimeout, func() { st.end(endTotal) })
	}
	route, owners, err := p.Route(rctx, rec, attach)
	if err != nil {
		st.stop()
		return nil, p.refuse(ctx, d, b, err)
	}
	d.route, d.owners, d.address = route, owners, route.Addr.String()
	place := p.Inject
	if in.Substitute {
		place = p.Substitute
	}
	sent, err := place(b, rec, attach)
	if err != nil {
		st.stop()
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
	if in.BodyStream != nil {
		st.up = p.newUpload(in, b, cancel)
		d.bytesOut += streamedBytes(in.BodyLength) // the body's bytes are counted as they are sent
	}
	if st.pair, err = p.cfg.Audit.Begin(ctx, d.record(audit.OutcomePending, "")); err != nil {
		st.stop()
		return nil, p.refuse(ctx, d, b, wire.Wrap(wire.CodeInternal, "audit log unavailable", err))
	}
	b.AddEgress(d.bytesOut)
	d.sent = true
	whole := p.cfg.Registry.IsDestination(rec.Origin())
	if whole {
		wholeOnly(sent)
	}
	var resp *http.Response
	if st.up != nil {
		resp, err = p.sendUpload(rctx, sent, route, in, st.up)
	} else {
		// A body sent whole went without the client's Expect: an
		// upstream's 100 answers nothing the client asked, but its other
		// 1xx (a 103 Early Hints to a GET) are the client's.
		resp, err = p.Send(p.withInformational(rctx, skipContinue(in.Informational)), sent, route, in.Upgrade)
	}
	if err != nil {
		err = st.readErr(err, false)
	}
	if err == nil {
		d.status = resp.StatusCode
		st.resp, st.src, st.Status = resp, resp.Body, resp.StatusCode
		switch {
		case whole && resp.StatusCode == http.StatusPartialContent:
			err = errPartial()
		case resp.StatusCode == http.StatusSwitchingProtocols:
			err = st.upgraded(in.Upgrade)
		default:
			err = st.sanitizeHeader()
		}
	}
	if err != nil {
		st.fail(err)
		st.Close()
		return nil, err
	}
	st.sc = p.NewScrubber()
	if p.cfg.IdleTimeout > 0 && st.conn == nil { // a relay over an upgraded connection keeps its own
		st.idle = time.AfterFunc(p.cfg.IdleTimeout, func() { st.end(endIdle) })
	}
	return st, nil
}

// upgraded checks a 101 answer: the upgrade asked for, to WebSocket, with
// no extension (none was offered: an extension would hide frames'
// payloads from the scanner), and a body that is the connection. Errors:
// egress.upstream_error.
func (st *Stream) upgraded(want string) error {
	h := st.resp.Header
	rwc, ok := st.resp.Body.(io.ReadWriteCloser)
	if want == "" || !ok || !strings.EqualFold(h.Get("Upgrade"), want) {
		return wire.Errorf(egressdapi.CodeUpstreamError, "the upstream switched protocols without being asked to")
	}
	if len(h.Values("Sec-Websocket-Extensions")) > 0 {
		return wire.Errorf(egressdapi.CodeUpstreamError, "the upstream negotiated a WebSocket extension that was not offered")
	}
	out, err := st.p.SanitizeFields(h)
	if err != nil {
		return err
	}
	st.Header, st.conn = out, rwc
	return nil
}

// Upgraded returns the upstream connection of a 101 answer (nil for any
// other): the caller relays frames over it and reports what passed with
// Count, then Close ends the exchange.
func (st *Stream) Upgraded() io.ReadWriteCloser { return st.conn }

// Dropped returns a channel closed once the exchange's bundle is dropped:
// its values are then unregistered from the scrubber, so a relay that
// scrubs with fresh scrubbers must end (nil, never ready, for a bundle
// outside the registry).
func (st *Stream) Dropped() <-chan struct{} { return st.b.Dropped() }

// Done returns a channel closed when the exchange is ended on egressd's
// side (the total timeout, egressd stopping, Close): a relay over an
// upgraded connection must end then. EndedBy says why, when known.
func (st *Stream) Done() <-chan struct{} { return st.ctx.Done() }

// EndedBy returns what ended the exchange early ("" when nothing has).
func (st *Stream) EndedBy() string {
	why, _ := st.why.Load().(string)
	return why
}

// Count adds bytes relayed over an upgraded connection: out to the
// upstream (network_egress_bytes), in to the client.
func (st *Stream) Count(out, in uint64) {
	if out > 0 {
		st.d.bytesOut += out
		st.b.AddBytes(out)
	}
	if in > 0 {
		st.d.bytesIn += in
		st.b.AddIngress(in)
	}
}

// End records why an upgraded exchange ended (the after record's
// ended_by) and, when err is not nil, its code as the outcome.
func (st *Stream) End(why string, err error) {
	st.why.CompareAndSwap(nil, why)
	if err != nil {
		st.fail(err)
	}
}

// prepare runs the steps before routing: the bundle, validation, the
// host scans, credential resolution, policy and the request scan.
func (p *Pipeline) prepare(ctx context.Context, in Input, d *decision) (*bundle.Bundle, *request.Record, []*bundle.Credential, error) {
	b, err := in.Bundle, error(nil)
	if b == nil {
		if b, err = p.cfg.Registry.Get(in.Invocation); err != nil {
			return nil, nil, nil, p.refuse(ctx, d, nil, err)
		}
	}
	resolve := p.Resolve
	if in.Substitute {
		resolve = p.Placements
	}
	if err := p.ScanHost(in, nil); err != nil { // as written: before a parse error could quote it
		return nil, nil, nil, p.refuse(ctx, d, b, err)
	}
	rec, err := p.Validate(in)
	if err != nil {
		return nil, nil, nil, p.refuse(ctx, d, b, err)
	}
	d.rec = rec
	if err := p.ScanHost(in, rec); err != nil {
		// The host holds a value: the record and the log line name the
		// origin without it.
		d.origin = redactedOrigin(rec)
		return nil, nil, nil, p.refuse(ctx, d, b, err)
	}
	d.origin = rec.OriginString()
	if in.Substitute {
		if err := p.ScanProxyAuth(in.Header); err != nil { // step 1 stripped the field from rec
			return nil, nil, nil, p.refuse(ctx, d, b, err)
		}
	}
	attach, err := resolve(b, rec)
	if err != nil {
		return nil, nil, nil, p.refuse(ctx, d, b, err)
	}
	if err := p.Policy(b, rec); err != nil {
		return nil, nil, nil, p.refuse(ctx, d, b, err)
	}
	if err := p.Scan(rec); err != nil {
		return nil, nil, nil, p.refuse(ctx, d, b, err)
	}
	return b, rec, attach, nil
}

// stop stops the timers and cancels the upstream request.
func (st *Stream) stop() {
	if st.idle != nil {
		st.idle.Stop()
	}
	if st.total != nil {
		st.total.Stop()
	}
	st.cancel()
}

// end ends the exchange early for why (the first reason counts): the
// upstream request is cancelled, so a pending Read returns at once.
func (st *Stream) end(why string) {
	st.why.CompareAndSwap(nil, why)
	st.cancel()
}

// fail records err as the exchange's outcome, unless one was recorded.
func (st *Stream) fail(err error) {
	if st.endCode == "" {
		st.endCode = wire.CodeOf(err)
	}
}

// Read reads the scrubbed body (what it returns counts as the request's
// bytes_in and the bundle's inbound bytes as it passes). It returns io.EOF at the body's end;
// any other error means the answer was cut short and must reach the
// client as an incomplete body (an unterminated chunked encoding, a
// reset stream), never as a clean end: egress.response_aborted (the
// body holds a held value in a form that cannot be removed in place),
// egress.response_too_large (past -max-response-body), egress.timeout
// (idle or total timeout), egress.upstream_error.
func (st *Stream) Read(p []byte) (int, error) {
	if err := st.more(); err != nil {
		return 0, err
	}
	n := copy(p, st.out[st.off:])
	st.off += n
	st.count(n)
	return n, nil
}

// Next returns the next piece of the scrubbed body as the upstream
// released it, at least one byte, or Read's errors (io.EOF at the end)
// with no bytes. The piece is the Stream's: it stays valid until the next
// call to Next or Read, and the caller writes it out without a buffer of
// its own (a piece is at most 32 KiB read from the upstream, plus what
// the scrubber held back or put in place of a value). It counts as Read
// counts. Next and Read may be mixed, from one goroutine at a time.
func (st *Stream) Next() ([]byte, error) {
	if err := st.more(); err != nil {
		return nil, err
	}
	b := st.out[st.off:]
	st.off = len(st.out)
	st.count(len(b))
	return b, nil
}

// more makes st.out[st.off:] hold at least one byte, or returns the
// terminal error once the body is all handed out (the stream's buffers
// go back to the pool then).
func (st *Stream) more() error {
	for st.off == len(st.out) {
		if st.err != nil {
			st.releaseAll()
			return st.err
		}
		st.fill()
	}
	return nil
}

// count adds n bytes handed out to bytes_in and the bundle's inbound
// bytes.
func (st *Stream) count(n int) {
	if st.idle != nil && n > 0 {
		// Bytes handed to a slow client move too: an answer that
		// arrived fast and drains slowly is not idle.
		st.idle.Reset(st.p.cfg.IdleTimeout)
	}
	st.d.bytesIn += uint64(n)
	st.b.AddIngress(uint64(n))
}

// fill reads once from the upstream and scrubs what arrived into st.out,
// or sets st.err. st.out has been handed out whole.
func (st *Stream) fill() {
	st.releaseOut()
	if !BodyAllowed(st.Status) || (st.resp.Request != nil && st.resp.Request.Method == http.MethodHead) {
		st.err = io.EOF
		return
	}
	if st.gz && st.src == st.resp.Body {
		zr, err := gzip.NewReader(st.resp.Body)
		if err != nil {
			st.abort(st.readErr(err, true))
			return
		}
		st.src = zr
	}
	rb := st.readBuf()
	n, err := st.src.Read(rb)
	st.bulk = n >= smallRead
	out := st.outBuf(n)
	if n > 0 {
		if st.idle != nil {
			st.idle.Reset(st.p.cfg.IdleTimeout)
		}
		st.n += int64(n)
		if max := st.p.cfg.MaxResponse; max > 0 && st.n > int64(max) {
			st.why.CompareAndSwap(nil, endCap)
			st.abort(wire.Errorf(egressdapi.CodeResponseTooLarge, "response body is larger than %d bytes (-max-response-body)", max))
			return
		}
		var serr error
		out, serr = st.sc.Next(out, rb[:n])
		st.scrubbed(out, rb[:n])
		if serr != nil {
			st.abort(errEcho())
			return
		}
	}
	switch {
	case err == io.EOF:
		var serr error
		out, serr = st.sc.Close(st.out)
		st.scrubbed(out, rb[:n])
		if serr != nil {
			st.abort(errEcho())
			return
		}
		if err := st.sanitizeTrailer(); err != nil {
			st.abort(err)
			return
		}
		st.err = io.EOF
	case err != nil:
		st.abort(st.readErr(err, false))
	}
}

// abort ends the body with err: what was scrubbed before it is still
// returned, then err.
func (st *Stream) abort(err error) {
	if wire.CodeOf(err) == egressdapi.CodeResponseAborted {
		st.why.CompareAndSwap(nil, endEcho)
		if st.d.bytesIn == 0 && len(st.out) == 0 {
			// Nothing was passed on: the answer is refused whole, as a
			// buffered one is.
			err = errEscapedEcho()
		}
	}
	st.fail(err)
	st.err = err
}

// readErr types an error from reading the upstream body (decoding says
// whether gzip failed).
func (st *Stream) readErr(err error, decoding bool) error {
	if uerr := st.up.failure(); uerr != nil {
		return uerr // the request body's finding, or its client failing
	}
	if errors.Is(context.Cause(st.ctx), ErrClientGone) {
		st.why.CompareAndSwap(nil, endClient)
	}
	switch st.why.Load() {
	case endIdle:
		return wire.Wrap(egressdapi.CodeTimeout, "no byte moved for longer than the idle timeout", err)
	case endTotal:
		return wire.Wrap(egressdapi.CodeTimeout, "the exchange took longer than the total timeout", err)
	case endClient:
		return wire.Wrap(egressdapi.CodeClientClosed, "the client went away", err)
	}
	if decoding || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) {
		return wire.Wrap(egressdapi.CodeResponseUndecodable, "gzip response body does not decode", err)
	}
	if wire.CodeOf(err) != wire.CodeInternal { // the transport's, typed
		return err
	}
	return wire.Wrap(egressdapi.CodeUpstreamError, "the upstream body ended early", err)
}

// errEcho aborts an answer that holds a held value in a form that cannot
// be removed in place.
func errEcho() error {
	return wire.Errorf(egressdapi.CodeResponseAborted, "the answer holds a credential value in an escaped form that cannot be removed in place; it was cut off before it")
}

// Trailer returns the sanitized trailer fields, once Read returned
// io.EOF (none before).
func (st *Stream) Trailer() []request.Field { return st.trailer }

// Fail records err (a failure of the caller's side: the client could not
// be written to) as the exchange's outcome and ends it.
func (st *Stream) Fail(err error) {
	st.fail(err)
	st.end(endClient)
}

// Close ends the exchange: the upstream body is closed (a body not read to
// its end cancels the upstream request), and the after record, the
// decision line and the bundle's inbound bytes are written. It is safe to
// call more than once.
func (st *Stream) Close() error {
	st.closeOnce.Do(func() {
		if st.up != nil {
			st.d.bytesOut += uint64(st.up.finish())
			if uerr := st.up.failure(); uerr != nil {
				st.fail(uerr) // found after the answer had begun, or ended
			}
		}
		complete := st.err == io.EOF && st.off == len(st.out)
		if !complete && st.endCode == "" && st.resp != nil && BodyAllowed(st.Status) && st.conn == nil {
			// The caller stopped reading: it gave up on the answer.
			st.why.CompareAndSwap(nil, endClient)
			st.endCode = egressdapi.CodeClientClosed
		}
		st.stop()
		if st.resp != nil {
			st.resp.Body.Close()
		}
		outcome, code := audit.OutcomeOK, st.endCode
		if code != "" {
			outcome = audit.OutcomeError
		}
		fields := st.d.in.Fields
		if why, _ := st.why.Load().(string); why != "" {
			fields = withField(fields, KeyEndedBy, why)
		}
		ctx := context.Background()
		if _, aerr := st.pair.EndWith(ctx, outcome, code, fields, st.d.attrs()); aerr != nil {
			st.p.cfg.Logger.Error("audit.append_failed", slog.String("op", OpRequest), slog.Any("err", aerr))
		}
		var err error
		if code != "" {
			err = wire.Errorf(code, "%s", code)
		}
		st.d.finish(st.p, err)
	})
	return nil
}

// withField returns a copy of fields with k set to v (fields is shared
// by every request of a connection and never written).
func withField(fields map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(fields)+1)
	for fk, fv := range fields {
		out[fk] = fv
	}
	out[k] = v
	return out
}

// BodyAllowed reports whether a response with status may have a body
// (RFC 9110 section 6.4.1): not 1xx, 204 or 304.
func BodyAllowed(status int) bool {
	return !(status >= 100 && status <= 199) && status != http.StatusNoContent && status != http.StatusNotModified
}
