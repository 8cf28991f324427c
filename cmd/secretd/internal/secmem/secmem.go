// Package secmem holds secret values in memory the Go runtime does not
// manage: each Buf is an anonymous private mapping (mmap(2)) outside the Go
// heap, so the garbage collector never copies or scans it, locked into RAM
// with mlock(2) where RLIMIT_MEMLOCK allows (and, on Linux, excluded from
// core dumps with MADV_DONTDUMP). When locking fails the buffer is still
// used, unlocked: the Allocator logs one warning and reports Degraded; it
// never panics or blocks. Values never pass through a Go string here.
package secmem

import (
	"log/slog"
	"sync"
	"sync/atomic"
)

// Allocator makes Bufs and counts them. The zero value is not usable; make
// one with New. It is safe for concurrent use.
type Allocator struct {
	log      *slog.Logger
	warnOnce sync.Once
	degraded atomic.Bool
	live     atomic.Int64
	locked   atomic.Int64
	lock     func([]byte) error // mlock(2); replaced in tests
}

// New returns an Allocator that logs its one degradation warning to log.
func New(log *slog.Logger) *Allocator { return &Allocator{log: log, lock: lockMem} }

// Buf is one secret value in a private mapping. Its zero value is empty.
// A Buf is not safe for concurrent use; its owner (a lease or a credential)
// serializes access.
type Buf struct {
	mem    []byte // the whole mapping (page-rounded); nil after Free
	n      int    // value length
	locked bool
	a      *Allocator
}

// Copy returns a new Buf holding a copy of src; the caller may then zero
// src. An empty src gives an empty Buf with no mapping. Errors come only
// from mmap itself (out of address space); a failed mlock degrades.
func (a *Allocator) Copy(src []byte) (*Buf, error) {
	b := &Buf{a: a, n: len(src)}
	if len(src) == 0 {
		return b, nil
	}
	mem, err := mapAnon(len(src))
	if err != nil {
		return nil, err
	}
	b.mem = mem
	copy(mem, src)
	if err := a.lock(mem); err != nil {
		a.degrade(err)
	} else {
		b.locked = true
		a.locked.Add(1)
	}
	a.live.Add(1)
	return b, nil
}

func (a *Allocator) degrade(err error) {
	a.degraded.Store(true)
	a.warnOnce.Do(func() {
		if a.log != nil {
			a.log.Warn("secmem.mlock_unavailable", slog.String("err", err.Error()),
				slog.String("effect", "secret values stay in unlocked memory and may be swapped; raise RLIMIT_MEMLOCK (LimitMEMLOCK=) to lock them"))
		}
	})
}

// Degraded reports whether any buffer could not be locked.
func (a *Allocator) Degraded() bool { return a.degraded.Load() }

// Live returns the number of Bufs not yet freed (empty ones excluded).
func (a *Allocator) Live() int64 { return a.live.Load() }

// Locked returns the number of live Bufs that are mlocked.
func (a *Allocator) Locked() int64 { return a.locked.Load() }

// Len returns the value's length in bytes; 0 after Free.
func (b *Buf) Len() int {
	if b == nil || (b.mem == nil && b.n != 0) {
		return 0
	}
	return b.n
}

// Bytes returns the value in place (not a copy). The slice is valid only
// until Free; callers must not keep it, convert it to a string or modify it.
func (b *Buf) Bytes() []byte {
	if b == nil || b.mem == nil {
		return nil
	}
	return b.mem[:b.n:b.n]
}

// AppendTo appends the value to dst and returns the result, for the one
// place a value leaves secretd (a consume answer).
func (b *Buf) AppendTo(dst []byte) []byte { return append(dst, b.Bytes()...) }

// Free zeroes the whole mapping, unlocks and unmaps it. It is idempotent;
// after Free the Buf is empty.
func (b *Buf) Free() {
	if b == nil || b.mem == nil {
		if b != nil {
			b.n = 0
		}
		return
	}
	Zero(b.mem)
	if b.locked {
		_ = unlockMem(b.mem)
		b.a.locked.Add(-1)
	}
	_ = unmap(b.mem)
	b.a.live.Add(-1)
	b.mem, b.n, b.locked = nil, 0, false
}

// Zero overwrites b with zeros (the compiler does not elide stores to
// memory that outlives the call). Use it on every transient copy of a value.
func Zero(b []byte) {
	clear(b)
}
