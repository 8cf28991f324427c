package rpc

import (
	"sync"
	"time"
)

// replayCache remembers request ids until their own deadlines pass. A
// request whose deadline has passed is refused before it reaches the cache,
// so forgetting an id at its deadline never lets a replay through.
//
// Ids are one namespace (a repeat is refused whoever sends it), but the cap
// max applies per peer UID: a peer that floods the cache with fresh ids
// fills only its own quota, never another peer's.
type replayCache struct {
	mu     sync.Mutex
	seen   map[[16]byte]replayEntry
	perUID map[uint32]int
	max    int // per uid
	sweep  time.Time
}

type replayEntry struct {
	deadline time.Time
	uid      uint32
}

func newReplayCache(max int) *replayCache {
	return &replayCache{seen: make(map[[16]byte]replayEntry), perUID: make(map[uint32]int), max: max}
}

// add records id, sent by uid, until deadline. It reports false when id is
// already held (a replay) and full when uid's quota is used up after
// sweeping.
func (c *replayCache) add(uid uint32, id [16]byte, deadline, now time.Time) (fresh, full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.seen[id]; ok && now.Before(e.deadline) {
		return false, false
	}
	if now.Sub(c.sweep) > time.Second {
		c.sweep = now
		for k, e := range c.seen {
			if !now.Before(e.deadline) {
				c.remove(k, e)
			}
		}
	}
	if c.perUID[uid] >= c.max {
		return false, true
	}
	if e, ok := c.seen[id]; ok {
		c.remove(id, e) // expired, not yet swept
	}
	c.seen[id] = replayEntry{deadline: deadline, uid: uid}
	c.perUID[uid]++
	return true, false
}

// remove deletes id's entry e; c.mu is held.
func (c *replayCache) remove(id [16]byte, e replayEntry) {
	delete(c.seen, id)
	if c.perUID[e.uid]--; c.perUID[e.uid] <= 0 {
		delete(c.perUID, e.uid)
	}
}
