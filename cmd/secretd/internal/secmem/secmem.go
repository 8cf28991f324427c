// Package secmem holds secret values in memory the Go runtime does not
// manage. Values live in slots carved from anonymous private mappings
// (mmap(2)) outside the Go heap, so the garbage collector never copies or
// scans them; each mapping is locked into RAM with mlock(2) where
// RLIMIT_MEMLOCK allows and, on Linux, excluded from core dumps with
// MADV_DONTDUMP. Slots come in power-of-two size classes (64 B to 64 KiB)
// from 64 KiB chunks that are mapped once and reused: a freed slot is
// zeroed and goes back to its class's free list, so staging a lease costs
// no system call. When locking a chunk fails the chunk is still used,
// unlocked: the Allocator logs one warning and reports Degraded; it never
// panics or blocks. There are no guard pages between slots. Values never
// pass through a Go string here.
package secmem

import (
	"fmt"
	"log/slog"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Slot sizes: classes are powers of two from MinSlot to ChunkSize bytes.
const (
	MinSlot   = 64
	ChunkSize = 64 << 10
	nClasses  = 11 // 64 B .. 64 KiB
)

// Allocator hands out Bufs from locked chunks. Make one with New; it is
// safe for concurrent use.
type Allocator struct {
	log      *slog.Logger
	warnOnce sync.Once
	degraded atomic.Bool
	live     atomic.Int64
	locked   atomic.Int64
	lock     func([]byte) error // mlock(2); replaced in tests

	mu     sync.Mutex
	free   [nClasses][]slot
	chunks [][]byte
	closed bool
}

type slot struct {
	mem    []byte
	locked bool
}

// New returns an Allocator that logs its one degradation warning to log.
func New(log *slog.Logger) *Allocator { return &Allocator{log: log, lock: lockMem} }

// Buf is one secret value in a slot. Its zero value is empty. A Buf is not
// safe for concurrent use; its owner (a lease or a credential) serializes
// access.
type Buf struct {
	s     slot // the whole slot; mem is nil after Free
	n     int  // value length
	class int
	a     *Allocator
}

// Copy returns a new Buf holding a copy of src (at most ChunkSize bytes);
// the caller may then zero src. An empty src gives an empty Buf. Errors
// come only from mmap itself (out of address space); a failed mlock
// degrades.
func (a *Allocator) Copy(src []byte) (*Buf, error) {
	if len(src) == 0 {
		return &Buf{}, nil
	}
	if len(src) > ChunkSize {
		return nil, fmt.Errorf("secmem: value of %d bytes exceeds %d", len(src), ChunkSize)
	}
	class := classOf(len(src))
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, fmt.Errorf("secmem: allocator closed")
	}
	if len(a.free[class]) == 0 {
		if err := a.grow(class); err != nil {
			a.mu.Unlock()
			return nil, err
		}
	}
	fl := a.free[class]
	s := fl[len(fl)-1]
	a.free[class] = fl[:len(fl)-1]
	a.mu.Unlock()
	copy(s.mem, src)
	a.live.Add(1)
	if s.locked {
		a.locked.Add(1)
	}
	return &Buf{s: s, n: len(src), class: class, a: a}, nil
}

// classOf returns the size class of an n-byte value (1 ≤ n ≤ ChunkSize).
func classOf(n int) int {
	if n <= MinSlot {
		return 0
	}
	return bits.Len(uint(n-1)) - 6 // 65..128 → 1, ..., 32769..65536 → 10
}

// grow maps and locks one chunk and splits it into slots of class. a.mu
// is held.
func (a *Allocator) grow(class int) error {
	mem, err := mapAnon(ChunkSize)
	if err != nil {
		return err
	}
	locked := true
	if err := a.lock(mem); err != nil {
		locked = false
		a.degrade(err)
	}
	a.chunks = append(a.chunks, mem)
	size := MinSlot << class
	for off := 0; off+size <= len(mem); off += size {
		a.free[class] = append(a.free[class], slot{mem: mem[off : off+size : off+size], locked: locked})
	}
	return nil
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

// Degraded reports whether any chunk could not be locked.
func (a *Allocator) Degraded() bool { return a.degraded.Load() }

// Live returns the number of Bufs not yet freed (empty ones excluded).
func (a *Allocator) Live() int64 { return a.live.Load() }

// Locked returns the number of live Bufs in locked memory.
func (a *Allocator) Locked() int64 { return a.locked.Load() }

// Close zeroes and unmaps every chunk. Later Copies fail and Frees only
// forget their Buf; no Buf's Bytes may be used afterwards.
func (a *Allocator) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.chunks {
		Zero(c)
		_ = unmap(c)
	}
	a.chunks = nil
	a.free = [nClasses][]slot{}
	a.closed = true
}

// Len returns the value's length in bytes; 0 after Free.
func (b *Buf) Len() int {
	if b == nil || b.s.mem == nil {
		return 0
	}
	return b.n
}

// Bytes returns the value in place (not a copy). The slice is valid only
// until Free; callers must not keep it, convert it to a string or modify it.
func (b *Buf) Bytes() []byte {
	if b == nil || b.s.mem == nil {
		return nil
	}
	return b.s.mem[:b.n:b.n]
}

// AppendTo appends the value to dst and returns the result.
func (b *Buf) AppendTo(dst []byte) []byte { return append(dst, b.Bytes()...) }

// Free zeroes the slot and returns it to the allocator. It is idempotent
// and nil-safe; after Free the Buf is empty.
func (b *Buf) Free() {
	if b == nil || b.s.mem == nil {
		return
	}
	a := b.a
	a.live.Add(-1)
	if b.s.locked {
		a.locked.Add(-1)
	}
	a.mu.Lock()
	if !a.closed { // after Close the mapping is gone (and was zeroed)
		Zero(b.s.mem)
		a.free[b.class] = append(a.free[b.class], b.s)
	}
	a.mu.Unlock()
	b.s, b.n = slot{}, 0
}

// Zero overwrites b with zeros (the compiler does not elide stores to
// memory that outlives the call). Use it on every transient copy of a value.
func Zero(b []byte) {
	clear(b)
}
