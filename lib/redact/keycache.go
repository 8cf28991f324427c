package redact

import "sync/atomic"

// Bounds of a KeyCache.
const (
	// keyCacheSlots is how many keys a KeyCache holds at most.
	keyCacheSlots = 256
	// maxCachedKey is the longest key, in bytes, a KeyCache holds.
	maxCachedKey = 64
)

// KeyCache remembers what the policy and a Scrubber make of short keys —
// attribute and field names, which repeat from one record to the next
// ("origin", "method", "status"...) — so that a writer need not check the
// same constant keys on every record. It answers exactly what the checks
// it replaces would: an entry holds a key's own bytes, and is used only
// while the Scrubber has the registrations (the matcher generation) it
// was checked against; a registration or an unregistration makes every
// entry stale. Keys the Scrubber changes are not cached (they are checked
// every time).
//
// It is bounded: at most 256 keys of at most 64 bytes, in a direct-mapped
// table. A slot is filled only while empty or stale, so a stream of
// one-off keys costs at most one allocation per slot per generation and
// never evicts the keys already held. An entry keeps its key (the
// caller's string, not a copy) reachable until its slot is refilled. It
// is safe for concurrent use.
type KeyCache struct {
	sc    *Scrubber
	slots [keyCacheSlots]atomic.Pointer[keyEntry]
}

// keyEntry is what a KeyCache knows of one key under one generation.
type keyEntry struct {
	key       string
	gen       uint64 // matcher generation under which the Scrubber leaves key unchanged (0: none registered)
	text      bool   // String(key) == key
	sensitive bool   // IsSensitiveKey(key)
}

// NewKeyCache returns an empty KeyCache for keys scrubbed by s (nil:
// policy only).
func NewKeyCache(s *Scrubber) *KeyCache { return &KeyCache{sc: s} }

// Clean reports whether s.Scrub(String(key)) == key, s being the
// KeyCache's Scrubber: neither the policy nor a registered value changes
// key. It does not allocate once key is cached.
func (c *KeyCache) Clean(key string) bool {
	e, scrubbed := c.lookup(key)
	return !scrubbed && e.text
}

// Plain reports whether key is not sensitive (IsSensitiveKey) and
// s.Scrub(key) == key, s being the KeyCache's Scrubber: a value under key
// is not redacted for its key, and key is written as it is. It does not
// allocate once key is cached.
func (c *KeyCache) Plain(key string) bool {
	e, scrubbed := c.lookup(key)
	return !scrubbed && !e.sensitive
}

// lookup returns the entry for key under the Scrubber's current
// registrations, computing it on a miss; scrubbed is true (and e empty)
// when the Scrubber changes key.
func (c *KeyCache) lookup(key string) (e keyEntry, scrubbed bool) {
	m := c.sc.load()
	var gen uint64
	if m != nil {
		gen = m.gen
	}
	if len(key) == 0 || len(key) > maxCachedKey {
		return c.compute(key, m, gen)
	}
	slot := &c.slots[keySlot(key)]
	old := slot.Load()
	if old != nil && old.gen == gen && old.key == key {
		return *old, false
	}
	e, scrubbed = c.compute(key, m, gen)
	if !scrubbed && (old == nil || old.gen != gen) {
		ne := new(keyEntry)
		*ne = e
		slot.CompareAndSwap(old, ne) // a concurrent fill wins; either is right
	}
	return e, scrubbed
}

// compute checks key against the policy and m (nil: nothing registered),
// whose generation is gen.
func (c *KeyCache) compute(key string, m *matcher, gen uint64) (keyEntry, bool) {
	if m != nil {
		if i, _ := m.find(key, 0); i >= 0 {
			return keyEntry{}, true
		}
	}
	return keyEntry{key: key, gen: gen, text: String(key) == key, sensitive: IsSensitiveKey(key)}, false
}

// keySlot hashes a key of 1 to maxCachedKey bytes to a slot from its
// length and three of its bytes: constant time, and distinct for the
// short keys records carry in practice (a collision only costs a miss).
func keySlot(key string) uint32 {
	n := len(key)
	h := uint32(n) ^ uint32(key[0])<<8 ^ uint32(key[n/2])<<16 ^ uint32(key[n-1])<<24
	h *= 0x9E3779B1
	return h >> 24 // keyCacheSlots == 256
}
