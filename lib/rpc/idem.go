package rpc

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"hostkit.dev/lib/wire"
)

// idemKey scopes an idempotency record to the peer that made it, so another
// peer can never read or replay someone else's answer (docs/protocol.md,
// "Replay, idempotency and deadlines").
type idemKey struct {
	uid uint32
	op  string
	key string
}

type idemEntry struct {
	gen     uint64 // the store's count of entries made, at this one: its identity in the finish queue
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
// The caps apply per peer UID: max records and maxBytes of stored
// answers. One peer that floods the store with fresh keys exhausts only
// its own quota, never another peer's (only role holders reach the store,
// so the total stays bounded by the role table). A peer whose answers pass
// maxBytes loses its oldest finished records first, as if they had
// expired: a retry under an evicted key runs the op again, so an op whose
// answers are large and whose retries must not repeat it keeps its own
// durable record (the containerization-helper does).
type idemStore struct {
	mu       sync.Mutex
	entries  map[idemKey]*idemEntry
	perUID   map[uint32]int           // live entries per peer uid
	bytes    map[uint32]int64         // bytes of stored answers per peer uid
	finished map[uint32][]finishedRec // per peer uid, in finish order (evictOver)
	made     uint64                   // entries made so far (idemEntry.gen)
	ttl      time.Duration
	max      int   // records per uid
	maxBytes int64 // answer bytes per uid
	sweep    time.Time
}

// finishedRec is a record with a stored answer, in its peer's finish
// order, named by key and generation (never by pointer, so a stale item
// keeps no answer alive); it may be stale (the record expired or was
// replaced), which live checks.
type finishedRec struct {
	key idemKey
	gen uint64
}

// live reports whether f still names the record in the store.
func (s *idemStore) live(f finishedRec) bool {
	e, ok := s.entries[f.key]
	return ok && e.gen == f.gen
}

// idemMaxBytes is the default answer-byte quota per peer (64 MiB).
const idemMaxBytes = 64 << 20

func newIdemStore(ttl time.Duration, max int, maxBytes int64) *idemStore {
	return &idemStore{entries: make(map[idemKey]*idemEntry), perUID: make(map[uint32]int), bytes: make(map[uint32]int64),
		finished: make(map[uint32][]finishedRec), ttl: ttl, max: max, maxBytes: maxBytes}
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
	s.made++
	e := &idemEntry{gen: s.made, digest: digest, done: make(chan struct{}), expires: now.Add(s.ttl)}
	s.entries[k] = e
	s.perUID[k.uid]++
	return e, true, nil
}

// remove deletes k's record, its count and its bytes; s.mu is held.
func (s *idemStore) remove(k idemKey) {
	e, ok := s.entries[k]
	if !ok {
		return
	}
	delete(s.entries, k)
	if s.perUID[k.uid]--; s.perUID[k.uid] <= 0 {
		delete(s.perUID, k.uid)
	}
	if s.bytes[k.uid] -= int64(len(e.body)); s.bytes[k.uid] <= 0 {
		delete(s.bytes, k.uid)
	}
}

// evictOver removes uid's earliest finished records until its stored
// answers fit maxBytes; s.mu is held. The peer's finish-order queue makes
// each eviction O(1) and never looks at another peer's records.
func (s *idemStore) evictOver(uid uint32) {
	q := s.finished[uid]
	for s.bytes[uid] > s.maxBytes && len(q) > 0 {
		f := q[0]
		q = q[1:]
		if s.live(f) {
			s.remove(f.key)
		}
	}
	s.finished[uid] = q
}

// queueFinished appends k's record to its peer's finish order; s.mu is
// held. Records that left the store (expired, replaced) stay in the queue
// until evicted or until the queue holds twice the peer's live records,
// when it is compacted, so it stays proportional to the store.
func (s *idemStore) queueFinished(k idemKey, e *idemEntry) {
	q := append(s.finished[k.uid], finishedRec{key: k, gen: e.gen})
	if len(q) > 2*s.perUID[k.uid]+16 {
		kept := q[:0]
		for _, f := range q {
			if s.live(f) {
				kept = append(kept, f)
			}
		}
		q = kept
	}
	s.finished[k.uid] = q
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
	if s.entries[k] == e && len(body) > 0 {
		s.bytes[k.uid] += int64(len(body))
		s.queueFinished(k, e)
		s.evictOver(k.uid)
	}
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
