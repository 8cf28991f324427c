package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
	"hostkit.dev/cmd/containerization-helper/internal/state"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// pendingKey is the context key under which durableIdem hands a
// mutation's handler the *pending it fills (settlePhase, dropRecord).
type pendingKey struct{}

// pending is the container record change a mutation's handler leaves for
// durableIdem: its settled phase (put) or the removal of its record
// (del), written with the op's idempotency record in one store write.
type pending struct {
	put *state.Container
	del string
}

// durableIdem keeps a mutation's answer in the store under (peer uid, op,
// idempotency key), so a retry after the helper exited (idle, crash,
// upgrade) gets the same answer, and a different body under the same key
// request.idempotency_conflict, as lib/rpc's in-memory records do while
// the process lives. Answers that had no effect (retry "safe") or whose
// effect is unknown (internal, op.cancelled, a deadline) are not kept:
// the caller observes and retries. The handler's settled record change
// (pending) becomes durable in the same write as the answer, before the
// answer is sent; when that write fails, the op fails with the store's
// error (its effect is then known only to observe).
func (s *Server) durableIdem(h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, call *rpc.Call) (any, error) {
		if call.Idem == "" {
			return h(ctx, call)
		}
		// Scoped like lib/rpc's records and docs/protocol.md: (uid, op, key).
		key := strconv.FormatUint(uint64(call.Peer.UID), 10) + ":" + call.Op + ":" + call.Idem
		sum := sha256.Sum256(call.Body) // the body is canonical: one spelling per value
		digest := hex.EncodeToString(sum[:])
		stored, ok, err := s.cfg.Store.Idem(key, call.Op, digest)
		if wire.CodeOf(err) == state.CodeIdemConflict {
			return nil, wire.Errorf(wire.CodeRequestIdemConflict, "idempotency key was used with a different request body")
		}
		if err != nil {
			return nil, err
		}
		if ok {
			var r idemResult
			if err := wire.Unmarshal(stored, &r, true); err != nil {
				return nil, wire.Wrap(wire.CodeInternal, "stored answer does not decode", err)
			}
			if r.Code != "" {
				return nil, &wire.Error{Code: r.Code, Msg: r.Msg, Retry: wire.Retry(r.Retry)}
			}
			return msgpack.RawMessage(r.Body), nil
		}
		p := &pending{}
		v, err := h(context.WithValue(ctx, pendingKey{}, p), call)
		batch := state.Batch{Put: p.put, Delete: p.del}
		if idem, ok := s.answerOf(ctx, v, err); ok {
			batch.Idem = &state.Idem{Key: key, Op: call.Op, RequestHash: digest, Result: idem}
		}
		record := batch.Put != nil || batch.Delete != ""
		if !record && batch.Idem == nil {
			return v, err
		}
		// The after record is written now and synced with this write:
		// both are durable before the answer leaves.
		written := s.endLazy(ctx, err)
		var aerr error
		_, serr := withAuditSync(ctx, func() error {
			_, aerr = s.cfg.Store.Apply(batch)
			return aerr
		})
		if serr != nil {
			s.log.Error("audit.append_failed", "op", call.Op, "code", wire.CodeOf(serr))
		}
		if aerr != nil && record && batch.Idem != nil {
			// The idempotency answer could not be kept (conflict, the
			// table or the file is full): the record of what was done
			// must still be written.
			s.log.Warn("helper.idem_store_failed", "op", call.Op, "code", wire.CodeOf(aerr))
			batch.Idem = nil
			_, aerr = s.cfg.Store.Apply(batch)
		}
		switch {
		case aerr != nil && record:
			// The runtime may already have acted: never "retry safe".
			we := *wire.AsError(aerr)
			we.Retry = wire.RetryAfterObserve
			return nil, &we
		case aerr != nil:
			s.log.Warn("helper.idem_store_failed", "op", call.Op, "code", wire.CodeOf(aerr))
		}
		if serr != nil || !written {
			return nil, errAuditUnsynced
		}
		return v, err
	}
}

// errAuditUnsynced is the answer to a mutation whose "after" audit record
// could not be made durable: nothing is acknowledged before its record is,
// and the op may have acted.
var errAuditUnsynced = &wire.Error{Code: wire.CodeInternal, Msg: "the audit log could not record this change's outcome; observe before retrying", Retry: wire.RetryAfterObserve}

// answerOf encodes the answer (v, err) to keep for a retry, or reports
// false when it must not be kept: no effect (retry safe) or an unknown one
// (internal, op.cancelled, the op's context ended).
func (s *Server) answerOf(ctx context.Context, v any, err error) ([]byte, bool) {
	var r idemResult
	if err != nil {
		we := wire.AsError(err)
		if we.Retry == wire.RetrySafe || we.Code == wire.CodeInternal || we.Code == helperapi.CodeOpCancelled || ctx.Err() != nil {
			return nil, false
		}
		r.Code, r.Msg, r.Retry = we.Code, we.Msg, string(we.Retry)
	} else {
		b, merr := wire.Marshal(replayAnswer(v)) // logtail.go: a delete's log tail is not kept
		if merr != nil {
			return nil, false
		}
		r.Body = b
	}
	b, merr := wire.Marshal(&r)
	if merr != nil {
		s.log.Warn("helper.idem_store_failed", "code", wire.CodeOf(merr))
		return nil, false
	}
	return b, true
}
