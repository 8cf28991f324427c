package pipeline

import (
	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// Outbound is the outbound scan of a body that is sent on as it arrives:
// a streamed request body, or the client's side of a WebSocket
// connection (every data message, then every control frame, each read as
// one text). It finds what the scan of a whole body finds (Placements,
// Scan and ScanMessage read a buffered body for it): a held value of any
// invocation in any form lib/redact knows (redact.Detector), a
// placeholder of any invocation in the text or its percent-decodings up
// to four deep, in any letter case, and, for a request body, a body that
// is a held value whole. Next says how much of the body may be sent on:
// everything but the longest suffix that may still begin one of these
// (the Detector's hold-back and a partial "hkp_..." in any view). It is
// not safe for concurrent use. Create with Pipeline.NewOutbound.
//
// For every way a body is cut into pieces it refuses exactly the bodies
// the buffered scan refuses, with the code the buffered scan gives when
// the body holds one kind of finding (when it holds several, the one
// found first), and what it released before a refusal never reaches the
// first byte of the finding.
type Outbound struct {
	reg  *bundle.Registry
	det  *redact.Detector
	ph   *phScan
	what string // "request body" or "WebSocket message", for the refusal's text

	n, rel int64 // bytes read; bytes released
	// head is the body read so far while it is no longer than the
	// longest held value (nil past it): a request body equal to a held
	// value is egress.manual_credential_rejected, as Resolve finds.
	head    []byte
	maxHeld int
	pending bool // a held value was found while the body may still be one whole
	err     error
	closed  bool
}

// NewOutbound returns the scan of one body over the values and
// placeholders held now (placeholders are looked up as they are found).
// request selects the request body's refusals (a body equal to a held
// value is egress.manual_credential_rejected) over a WebSocket
// message's.
func (p *Pipeline) NewOutbound(request bool) *Outbound {
	reg := p.cfg.Registry
	o := &Outbound{reg: reg, det: reg.Scrubber().NewDetector(), ph: newPhScan(p.isPlaceholder), what: "WebSocket message"}
	if request {
		o.what = "request body"
		o.maxHeld = reg.MaxHeld()
		if o.maxHeld > 0 {
			o.head = make([]byte, 0, o.maxHeld)
		}
	}
	return o
}

// isPlaceholder reports whether ph (lowercase, placeholder-shaped) is a
// placeholder of a registered invocation.
func (p *Pipeline) isPlaceholder(ph string) bool {
	_, ok := p.cfg.Registry.PlaceholderOwner(ph)
	return ok
}

// Next reads b, the next piece of the body, and returns how many bytes
// of the body read so far (every piece) may be sent on; b is not kept.
// Once it returns an error, nothing more is released and every later
// call returns that error. Errors: egress.placeholder_misuse,
// egress.secret_in_request, and for a request body found to be a held
// value whole egress.manual_credential_rejected (only at Close: until the
// body is longer than every held value, a hit waits to know which).
func (o *Outbound) Next(b []byte) (release int64, err error) {
	if o.err != nil || o.closed {
		return o.rel, o.err
	}
	o.ph.write(b, o.n)
	dr, hit := o.det.Next(b)
	o.n += int64(len(b))
	if o.head != nil {
		if o.n <= int64(o.maxHeld) {
			o.head = append(o.head, b...)
		} else {
			o.head = nil
		}
	}
	switch {
	case o.ph.hit:
		o.err = o.errMisuse()
	case hit && o.head != nil:
		o.pending = true // the end tells whether the body is the value whole
	case hit || o.pending:
		o.err = o.errSecret()
	}
	if o.err != nil || o.pending {
		return o.rel, o.err
	}
	o.rel = max(o.rel, min(int64(dr), o.ph.held(o.n)))
	return o.rel, nil
}

// Close ends the body: it releases the rest, or returns the refusal the
// end completes (Next's errors).
func (o *Outbound) Close() (release int64, err error) {
	if o.err != nil || o.closed {
		return o.rel, o.err
	}
	o.closed = true
	o.ph.flush()
	_, hit := o.det.Close()
	switch {
	case len(o.head) > 0 && o.reg.Holds(o.head):
		o.err = wire.Errorf(egressdapi.CodeManualCredential, "the request body is a raw credential value; send it without one and egressd attaches it")
	case o.ph.hit:
		o.err = o.errMisuse()
	case hit || o.pending:
		o.err = o.errSecret()
	}
	if o.err != nil {
		return o.rel, o.err
	}
	o.rel = o.n
	return o.rel, nil
}

// Held returns how many bytes read are not released.
func (o *Outbound) Held() int64 { return o.n - o.rel }

// Read returns how many bytes have been read.
func (o *Outbound) Read() int64 { return o.n }

func (o *Outbound) errMisuse() error {
	return wire.Errorf(egressdapi.CodePlaceholderMisuse, "a placeholder in a %s is never substituted; it may appear only at its credential's staged target", o.what)
}

func (o *Outbound) errSecret() error {
	return wire.Errorf(egressdapi.CodeSecretInRequest, "the %s carries credential material where egressd did not place it", o.what)
}
