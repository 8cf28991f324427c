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

// durableIdem keeps a mutation's answer in the store under (peer uid, op,
// idempotency key), so a retry after the helper exited (idle, crash,
// upgrade) gets the same answer, and a different body under the same key
// request.idempotency_conflict, as lib/rpc's in-memory records do while
// the process lives. Answers that had no effect (retry "safe") or whose
// effect is unknown (internal, op.cancelled, a deadline) are not kept:
// the caller observes and retries.
func (s *Server) durableIdem(h rpc.Handler) rpc.Handler {
	return func(ctx context.Context, call *rpc.Call) (any, error) {
		if call.Idem == "" {
			return h(ctx, call)
		}
		key := strconv.FormatUint(uint64(call.Peer.UID), 10) + ":" + call.Idem
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
		v, err := h(ctx, call)
		var r idemResult
		if err != nil {
			we := wire.AsError(err)
			if we.Retry == wire.RetrySafe || we.Code == wire.CodeInternal || we.Code == helperapi.CodeOpCancelled || ctx.Err() != nil {
				return nil, err
			}
			r.Code, r.Msg, r.Retry = we.Code, we.Msg, string(we.Retry)
		} else if r.Body, err = wire.Marshal(v); err != nil {
			return nil, err
		}
		b, merr := wire.Marshal(&r)
		if merr == nil {
			merr = s.cfg.Store.PutIdem(key, call.Op, digest, b)
		}
		if merr != nil {
			s.log.Warn("helper.idem_store_failed", "op", call.Op, "code", wire.CodeOf(merr))
		}
		return v, err
	}
}
