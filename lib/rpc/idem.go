package rpc

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"hostkit.dev/lib/wire"
)

// idemKey scopes an idempotency record to the peer that made it, so another
// peer can never read or replay someone else's answer (DESIGN.md, "Replay
// and idempotency").
type idemKey struct {
	uid uint32
	op  string
	key string
}

type idemEntry struct {
	digest  [32]byte
	done    chan struct{} // closed when body/err are set
	body    []byte
	err     *wire.Error
	expires time.Time
}

// idemStore holds idempotency records in memory for ttl. The first request
// with a key runs; a concurrent or later one with the same body waits for
// and gets the same answer; one with another body is refused.
type idemStore struct {
	mu      sync.Mutex
	entries map[idemKey]*idemEntry
	ttl     time.Duration
	max     int
}

func newIdemStore(ttl time.Duration, max int) *idemStore {
	return &idemStore{entries: make(map[idemKey]*idemEntry), ttl: ttl, max: max}
}

// begin looks up k. It returns (entry, true) when this caller must run the
// op and later call finish; (entry, false) when a stored or in-flight answer
// exists, which wait returns. Errors: request.idempotency_conflict for a
// different body, server.busy when the store is full.
func (s *idemStore) begin(k idemKey, body []byte, now time.Time) (*idemEntry, bool, error) {
	digest := sha256.Sum256(body) // body is canonical: one spelling per value
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[k]; ok && now.Before(e.expires) {
		if e.digest != digest {
			return nil, false, wire.Errorf(wire.CodeRequestIdemConflict, "idempotency key was used with a different request body")
		}
		return e, false, nil
	}
	if len(s.entries) >= s.max {
		for key, e := range s.entries {
			if !now.Before(e.expires) {
				delete(s.entries, key)
			}
		}
		if len(s.entries) >= s.max {
			return nil, false, &wire.Error{Code: wire.CodeServerBusy, Msg: "too many idempotency records", Retry: wire.RetrySafe}
		}
	}
	e := &idemEntry{digest: digest, done: make(chan struct{}), expires: now.Add(s.ttl)}
	s.entries[k] = e
	return e, true, nil
}

// finish stores the answer. An error that had no effect (retry "safe") is
// not kept: the record is dropped so the caller may try again.
func (s *idemStore) finish(k idemKey, e *idemEntry, body []byte, err *wire.Error) {
	s.mu.Lock()
	if err != nil && err.Retry == wire.RetrySafe {
		if s.entries[k] == e {
			delete(s.entries, k)
		}
	}
	e.body, e.err = body, err
	s.mu.Unlock()
	close(e.done)
}

// wait returns the stored answer of e, or ctx's error.
func (e *idemEntry) wait(ctx context.Context) ([]byte, *wire.Error) {
	select {
	case <-e.done:
		return e.body, e.err
	case <-ctx.Done():
		return nil, &wire.Error{Code: wire.CodeRequestDeadline, Msg: "deadline passed while waiting for the first request with this idempotency key", Retry: wire.RetryAfterObserve}
	}
}
