package redact

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"
)

// TestKeyCacheAnswersAsTheChecks compares Clean and Plain with the checks
// they stand for, uncached and cached, for clean, sensitive, policy-changed,
// scrubbed, empty and over-long keys.
func TestKeyCacheAnswersAsTheChecks(t *testing.T) {
	t.Parallel()
	s := NewScrubber()
	s.Register([]byte(canary))
	c := NewKeyCache(s)
	keys := []string{"origin", "method", "bytes_in", "bytes_out", "token", "token_fp", "Authorization", "password=hunter2",
		"https://u:p@h", canary, "x" + canary, "", strings.Repeat("k", maxCachedKey+1), strings.Repeat("o", maxCachedKey+1)}
	for range 3 { // a miss, then hits
		for _, k := range keys {
			is := is.New(t)
			is.Equal(c.Clean(k), s.Scrub(String(k)) == k)               // Clean
			is.Equal(c.Plain(k), !IsSensitiveKey(k) && s.Scrub(k) == k) // Plain
		}
	}
	is := is.New(t)
	is.True(c.Clean("origin") && c.Plain("origin"))
	is.True(c.Clean("token") && !c.Plain("token")) // sensitive, but a clean key
	is.True(!c.Clean("password=hunter2"))
	is.True(!c.Clean(canary) && !c.Plain(canary))
}

// TestKeyCacheFollowsRegistrations checks that a key cached clean stops
// being clean as soon as it is registered as a value, and is clean again
// once unregistered: an entry holds only for the registrations it was
// checked against.
func TestKeyCacheFollowsRegistrations(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	var nilScrubber *Scrubber
	is.True(NewKeyCache(nilScrubber).Clean("origin")) // policy only
	s := NewScrubber()
	c := NewKeyCache(s)
	is.True(c.Clean("origin") && c.Plain("origin")) // cached with nothing registered
	unreg := s.Register([]byte("origin"))
	is.True(!c.Clean("origin")) // registered after it was cached
	is.True(!c.Plain("origin"))
	is.True(!c.Clean("x-origin-y"))
	other := s.Register([]byte("unrelated-value"))
	is.True(!c.Plain("origin")) // still registered under a later generation
	unreg()
	is.True(c.Clean("origin") && c.Plain("origin")) // unregistered
	other()
	is.True(c.Clean("origin") && c.Plain("origin"))
}

// TestKeyCacheBounded checks that a stream of distinct keys leaves at most
// keyCacheSlots entries, never evicts a current one, and still gets right
// answers once the table is full.
func TestKeyCacheBounded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	s.Register([]byte(canary))
	c := NewKeyCache(s)
	is.True(c.Plain("origin"))
	first := c.slots[keySlot("origin")].Load()
	for i := range 10000 {
		k := fmt.Sprintf("key-%d", i)
		is.Equal(c.Plain(k), false) // "key" is a sensitive fragment
		is.True(c.Clean(k))
		is.True(!c.Clean(k + canary))
	}
	held := 0
	for i := range c.slots {
		if e := c.slots[i].Load(); e != nil {
			held++
			is.True(len(e.key) <= maxCachedKey)
		}
	}
	is.True(held <= keyCacheSlots)
	is.True(c.slots[keySlot("origin")].Load() == first) // not evicted
	is.True(!c.Clean(strings.Repeat(canary, 4)))        // too long to cache, still checked
}

// TestKeyCacheNoAllocs: a cached key costs no allocation.
func TestKeyCacheNoAllocs(t *testing.T) {
	is := is.New(t)
	s := NewScrubber()
	s.Register([]byte(canary))
	c := NewKeyCache(s)
	c.Plain("origin")
	is.Equal(testing.AllocsPerRun(100, func() { _ = c.Plain("origin") && c.Clean("origin") }), 0.0)
}

// TestKeyCacheConcurrent runs lookups against registrations (for -race):
// every goroutine checks that a key it has registered is never clean.
func TestKeyCacheConcurrent(t *testing.T) {
	t.Parallel()
	s := NewScrubber()
	c := NewKeyCache(s)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			k := fmt.Sprintf("field-%d-name", i)
			for range 40 { // a Register rebuilds the scrubber's tables: about 35 ms under -race
				if !c.Clean(k) {
					t.Error("unregistered key not clean")
					return
				}
				unreg := s.Register([]byte(k))
				if c.Clean(k) || c.Plain(k) {
					t.Error("registered key reported clean")
				}
				unreg()
			}
		})
	}
	wg.Wait()
}

// TestHandlerKeyRegisteredLater: a key the handler has seen clean is
// scrubbed once registered as a value (the key cache follows
// registrations), and written as it is again once unregistered.
func TestHandlerKeyRegisteredLater(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	var buf bytes.Buffer
	l := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), s))
	l.Info("m", "origin-name", "v")
	is.True(strings.Contains(buf.String(), `"origin-name":"v"`))
	buf.Reset()
	unreg := s.Register([]byte("origin-name"))
	l.Info("m", "origin-name", "v")
	is.True(!strings.Contains(buf.String(), "origin-name")) // scrubbed
	is.True(strings.Contains(buf.String(), `"`+Redacted+`":"v"`))
	buf.Reset()
	unreg()
	l.Info("m", "origin-name", "v")
	is.True(strings.Contains(buf.String(), `"origin-name":"v"`))
}
