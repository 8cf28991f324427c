package server

import (
	"context"
	"runtime"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"hostkit.dev/cmd/secretd/internal/lease"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// OpReuseAttempt is the audit op written once when a consumed handle is
// presented again; it names the original stager.
const OpReuseAttempt = "lease.reuse_attempt"

// consumeOut is secretdapi.LeaseConsumeResponse as the server writes it:
// each value is encoded straight from its locked buffer, which is zeroed
// and unmapped right after (valueOut), so no heap copy of the value is
// made before the wire encoder's own buffer.
type consumeOut struct {
	Leases []leaseOut `msgpack:"leases"` // LeaseConsumeResponse.Leases
}

// leaseOut mirrors secretdapi.Lease (same keys, same order).
type leaseOut struct {
	BasicUser   string    `msgpack:"basic_user"`  // Lease.BasicUser
	Credential  string    `msgpack:"credential"`  // Lease.Credential
	Destination string    `msgpack:"destination"` // Lease.Destination
	Handle      []byte    `msgpack:"handle"`      // Lease.Handle
	Overwrite   bool      `msgpack:"overwrite"`   // Lease.Overwrite: header targets only
	Placeholder string    `msgpack:"placeholder"` // Lease.Placeholder
	Target      string    `msgpack:"target"`      // Lease.Target
	Template    string    `msgpack:"template"`    // Lease.Template: header targets only
	Value       *valueOut `msgpack:"value"`       // Lease.Value, encoded from locked memory
}

// valueOut encodes a value as msgpack bin and frees its buffer. A cleanup
// frees the buffer if the answer is never encoded.
type valueOut struct{ buf *secmem.Buf }

func newValueOut(b *secmem.Buf) *valueOut {
	v := &valueOut{buf: b}
	runtime.AddCleanup(v, func(b *secmem.Buf) { b.Free() }, b)
	return v
}

// AppendCanonical implements wire.CanonicalAppender (the path
// wire.Marshal takes): the value is appended as bin straight from its
// buffer, which is then freed.
func (v *valueOut) AppendCanonical(b []byte) ([]byte, error) {
	if p := v.buf.Bytes(); p != nil {
		b = wire.AppendBin(b, p)
	} else {
		b = append(b, 0xc0) // nil, as EncodeMsgpack writes it: Marshal refuses it
	}
	v.buf.Free()
	return b, nil
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (v *valueOut) EncodeMsgpack(enc *msgpack.Encoder) error {
	err := enc.EncodeBytes(v.buf.Bytes())
	v.buf.Free()
	return err
}

func (s *Server) leaseConsume(ctx context.Context, call *rpc.Call, req *secretdapi.LeaseConsumeRequest) (*consumeOut, error) {
	fields := map[string]any{"invocation": clip(req.Invocation), "count": len(req.Handles)}
	if call.Idem != "" {
		// An idempotency record would keep the answer, values included,
		// and hand it out again: consume is one-shot by definition.
		return nil, s.finish(ctx, call, wire.Errorf(wire.CodeRequestInvalid, "lease.consume does not take an idempotency key"), fields)
	}
	if err := checkInvocation(req.Invocation); err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	res, err := s.table.Consume(req.Invocation, req.Handles, call.Peer)
	if err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	fields["handle_fps"] = fps(res.MACs)
	for _, r := range res.Reuses {
		if r.First {
			s.record(ctx, Event{Op: OpReuseAttempt, Peer: call.Peer, Outcome: OutcomeRefused, Code: secretdapi.CodeLeaseConsumed, Corr: call.Corr,
				Fields: map[string]any{"index": r.Index, "handle_fp": r.MAC.FP(), "invocation": clip(req.Invocation),
					"stager_uid": r.Stager.UID, "stager_pid": r.Stager.PID, "consumer_uid": r.Consumer.UID, "consumer_pid": r.Consumer.PID, "consumed_at_ms": r.ConsumedAt.UnixMilli()}})
		}
	}
	if err := res.Err(); err != nil {
		fields["failures"] = failureList(res.Failures)
		if allBogus(res) {
			return nil, s.finishBogus(ctx, call, err, fields)
		}
		return nil, s.finish(ctx, call, err, fields)
	}
	out := &consumeOut{Leases: make([]leaseOut, len(res.Leases))}
	for i, l := range res.Leases {
		out.Leases[i] = leaseOut{BasicUser: l.Spec.BasicUser, Credential: l.Spec.Credential, Destination: l.Spec.Destination, Handle: l.Handle,
			Overwrite: l.Spec.Overwrite, Placeholder: l.Placeholder, Target: l.Spec.Target, Template: l.Spec.Template,
			Value: newValueOut(l.Value)}
		if !strings.HasPrefix(l.Spec.Target, "header:") {
			out.Leases[i].Template, out.Leases[i].Overwrite = "", false
		}
	}
	return out, s.finish(ctx, call, nil, fields)
}

// allBogus reports whether every failure of a batch is a bogus handle
// (and no reuse is being reported for the first time).
func allBogus(res *lease.Result) bool {
	for _, r := range res.Reuses {
		if r.First {
			return false
		}
	}
	for _, f := range res.Failures {
		if !bogus(f.Code) {
			return false
		}
	}
	return true
}

func failureList(fs []lease.Failure) []any {
	out := make([]any, len(fs))
	for i, f := range fs {
		out[i] = map[string]any{"index": f.Index, "code": f.Code, "handle_fp": f.MAC.FP()}
	}
	return out
}
