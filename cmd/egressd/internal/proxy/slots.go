package proxy

import (
	"sync"
)

// slots counts what each invocation holds at once (tunnels, or requests in
// the pipeline) against a per-invocation bound, so that one invocation
// cannot take every slot of a server-wide limit and starve the others.
type slots struct {
	max  int
	mu   sync.Mutex
	held map[string]int
}

func newSlots(max int) *slots { return &slots{max: max, held: map[string]int{}} }

// take reserves one slot for inv and reports whether one was free.
func (s *slots) take(inv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[inv] >= s.max {
		return false
	}
	s.held[inv]++
	return true
}

// give returns a slot that take reserved.
func (s *slots) give(inv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[inv] <= 1 {
		delete(s.held, inv)
		return
	}
	s.held[inv]--
}
