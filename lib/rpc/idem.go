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
//
// The cap max applies per peer UID: one peer that floods the store with
// fresh keys exhausts only its own quota, never another peer's (only role
// holders reach the store, so the total stays bounded by the role table).
type idemStore struct {
	mu      sync.Mutex
	entries map[idemKey]*idemEntry
	perUID  map[uint32]int // live entries per peer uid
	ttl     time.Duration
	max     int // per uid
	sweep   time.Time
}

func newIdemStore(ttl time.Duration, max int) *idemStore {
	return &idemStore{entries: make(map[idemKey]*idemEntry), perUID: make(map[uint32]int), ttl: ttl, max: max}
}

// begin looks up k. It returns (entry, true) when this caller must run the
// op and later call finish; (entry, false) when a stored or in-flight answer
// exists, which wait returns. Errors: request.idempotency_conflict for a
// different body, server.busy when k's peer holds its full quota.
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
	if s.perUID[k.uid] >= s.max && now.Sub(s.sweep) > time.Second {
		// Sweep at most once a second, so a peer at its quota cannot make
		// every request walk the whole store.
		s.sweep = now
		for key, e := range s.entries {
			if !now.Before(e.expires) {
				s.remove(key)
			}
		}
	}
	if s.perUID[k.uid] >= s.max {
		return nil, false, &wire.Error{Code: wire.CodeServerBusy, Msg: "too many idempotency records", Retry: wire.RetrySafe}
	}
	if _, ok := s.entries[k]; ok {
		s.remove(k) // an expired record under the same key
	}
	e := &idemEntry{digest: digest, done: make(chan struct{}), expires: now.Add(s.ttl)}
	s.entries[k] = e
	s.perUID[k.uid]++
	return e, true, nil
}

// remove deletes k's record and its count; s.mu is held.
func (s *idemStore) remove(k idemKey) {
	if _, ok := s.entries[k]; !ok {
		return
	}
	delete(s.entries, k)
	if s.perUID[k.uid]--; s.perUID[k.uid] <= 0 {
		delete(s.perUID, k.uid)
	}
}

// finish stores the answer. An error that had no effect (retry "safe") is
// not kept: the record is dropped so the caller may try again.
func (s *idemStore) finish(k idemKey, e *idemEntry, body []byte, err *wire.Error) {
	s.mu.Lock()
	if err != nil && err.Retry == wire.RetrySafe {
		if s.entries[k] == e {
			s.remove(k)
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
