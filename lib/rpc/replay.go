package rpc

import (
	"sync"
	"time"
)

// replayCache remembers request ids until their own deadlines pass. A
// request whose deadline has passed is refused before it reaches the cache,
// so forgetting an id at its deadline never lets a replay through.
type replayCache struct {
	mu    sync.Mutex
	seen  map[[16]byte]time.Time
	max   int
	sweep time.Time
}

func newReplayCache(max int) *replayCache {
	return &replayCache{seen: make(map[[16]byte]time.Time), max: max}
}

// add records id until deadline. It reports false when id is already held
// (a replay) and full when the cache is at its cap after sweeping.
func (c *replayCache) add(id [16]byte, deadline, now time.Time) (fresh, full bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.seen[id]; ok && now.Before(d) {
		return false, false
	}
	if len(c.seen) >= c.max || now.Sub(c.sweep) > time.Second {
		c.sweep = now
		for k, d := range c.seen {
			if !now.Before(d) {
				delete(c.seen, k)
			}
		}
		if len(c.seen) >= c.max {
			return false, true
		}
	}
	c.seen[id] = deadline
	return true, false
}

func (c *replayCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}
