package lease

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// MaxBatch is the most handles one consume may carry.
const MaxBatch = 256

// Consumed is one lease handed out by Consume. The caller owns Value and
// must Free it once the answer is written.
type Consumed struct {
	Spec        Spec        // what was staged
	Handle      []byte      // the caller's handle, echoed in the answer
	Placeholder string      // the lease's placeholder
	Value       *secmem.Buf // the value, moved out of the table
	MAC         MAC         // the handle's keyed digest (FP for audit)
}

// Failure is one handle of a refused batch.
type Failure struct {
	Index int    // the handle's index in the batch, from 0
	Code  string // a secretdapi lease.* code
	MAC   MAC    // the handle's keyed digest (FP for audit)
	Of    int    // for lease.duplicate_handle: the index it repeats
}

// Reuse is a consumed handle presented again.
type Reuse struct {
	Index      int       // the handle's index in the batch, from 0
	MAC        MAC       // the handle's keyed digest (FP for audit)
	Stager     sock.Peer // who staged the original lease
	Consumer   sock.Peer // who consumed it
	ConsumedAt time.Time // when it was consumed
	First      bool      // the first reuse of this handle: audit it in full
}

// Result is the outcome of Consume. On success Leases holds one lease per
// handle in order; otherwise Failures is non-empty and nothing was taken.
// MACs lists every handle's MAC in order (for audit fingerprints).
type Result struct {
	Leases   []Consumed // one per handle, in order; nil on failure
	Failures []Failure  // sorted by index; empty on success
	Reuses   []Reuse    // consumed handles presented again
	MACs     []MAC      // one per handle, in order
}

// Err returns nil on success, else a *wire.Error whose code is the first
// failure's and whose message names every failing index and its code,
// never a handle or a value.
func (r *Result) Err() error {
	if len(r.Failures) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString("nothing consumed:")
	for i, f := range r.Failures {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " handles[%d]: %s", f.Index, f.Code)
		if f.Code == secretdapi.CodeLeaseDuplicate {
			fmt.Fprintf(&b, " (same as handles[%d])", f.Of)
		}
	}
	return wire.Errorf(r.Failures[0].Code, "%s", b.String())
}

// Consume hands out the leases of handles for invocation, all or nothing:
// every handle is checked first (shape, epoch, duplicates in the batch,
// already consumed, unknown, expired on the monotonic clock, wrong
// invocation) and then, in the same critical section, all are removed and
// tombstoned. A failed batch changes nothing but marks reused tombstones
// as reported. Errors outside the batch: request.invalid for more than
// MaxBatch handles.
func (t *Table) Consume(invocation string, handles [][]byte, consumer sock.Peer) (*Result, error) {
	if len(handles) > MaxBatch {
		return nil, wire.Errorf(wire.CodeRequestInvalid, "at most %d handles per consume, got %d", MaxBatch, len(handles))
	}
	r := &Result{MACs: make([]MAC, len(handles))}
	first := make(map[MAC]int, len(handles))
	shapeOK := make([]bool, len(handles))
	for i, h := range handles {
		mac, code := t.keys.check(h)
		r.MACs[i] = mac
		if j, dup := first[mac]; dup {
			r.Failures = append(r.Failures, Failure{Index: i, Code: secretdapi.CodeLeaseDuplicate, MAC: mac, Of: j})
			continue
		}
		first[mac] = i
		if code != "" {
			r.Failures = append(r.Failures, Failure{Index: i, Code: code, MAC: mac})
			continue
		}
		shapeOK[i] = true
	}
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	entries := make([]*entry, len(handles))
	for i := range handles {
		if !shapeOK[i] {
			continue
		}
		mac := r.MACs[i]
		if tb, ok := t.tombs[mac]; ok {
			r.Reuses = append(r.Reuses, Reuse{Index: i, MAC: mac, Stager: tb.stager, Consumer: tb.consumer, ConsumedAt: tb.consumedAt, First: !tb.reported})
			tb.reported = true
			r.Failures = append(r.Failures, Failure{Index: i, Code: secretdapi.CodeLeaseConsumed, MAC: mac})
			continue
		}
		e, ok := t.leases[mac]
		switch {
		case !ok:
			r.Failures = append(r.Failures, Failure{Index: i, Code: secretdapi.CodeLeaseNotFound, MAC: mac})
		case !now.Before(e.expires):
			r.Failures = append(r.Failures, Failure{Index: i, Code: secretdapi.CodeLeaseExpired, MAC: mac})
		case e.spec.Invocation != invocation:
			r.Failures = append(r.Failures, Failure{Index: i, Code: secretdapi.CodeLeaseWrongInvocation, MAC: mac})
		default:
			entries[i] = e
		}
	}
	if len(r.Failures) > 0 {
		sortFailures(r.Failures)
		return r, nil
	}
	t.makeRoom(len(entries))
	r.Leases = make([]Consumed, len(handles))
	for i, e := range entries {
		delete(t.leases, e.mac)
		t.tombs[e.mac] = &tomb{stager: e.spec.Stager, consumer: consumer, consumedAt: now, expires: e.expires}
		t.tombQ = append(t.tombQ, e.mac)
		r.Leases[i] = Consumed{Spec: e.spec, Handle: handles[i], Placeholder: e.ph, Value: e.value, MAC: e.mac}
		e.value = nil
	}
	return r, nil
}

// makeRoom keeps the tombstones under 4×MaxLeases by dropping the oldest
// first (a reuse of an evicted handle reads lease.not_found); it is O(1)
// amortized. t.mu is held.
func (t *Table) makeRoom(n int) {
	limit := 4 * t.cfg.MaxLeases
	for len(t.tombs)+n > limit && t.tombHead < len(t.tombQ) {
		delete(t.tombs, t.tombQ[t.tombHead]) // a no-op for swept ones
		t.tombHead++
	}
}

func sortFailures(fs []Failure) {
	slices.SortStableFunc(fs, func(a, b Failure) int { return cmp.Compare(a.Index, b.Index) })
}

// handleErr builds the error of a single-handle op (index < 0) or of one
// index of a batch.
func handleErr(code string, index int) error {
	msg := map[string]string{
		secretdapi.CodeLeaseInvalidHandle:   "not a handle this secretd could have made",
		secretdapi.CodeLeaseStaleEpoch:      "the handle was staged by an earlier secretd process; leases do not survive a restart",
		secretdapi.CodeLeaseConsumed:        "the lease was already consumed",
		secretdapi.CodeLeaseNotFound:        "no such lease (unknown, revoked or expired and swept)",
		secretdapi.CodeLeaseExpired:         "the lease has expired",
		secretdapi.CodeLeaseWrongInvocation: "the lease belongs to another invocation",
	}[code]
	if index >= 0 {
		msg = fmt.Sprintf("handles[%d]: %s", index, msg)
	}
	return wire.Errorf(code, "%s", msg)
}
