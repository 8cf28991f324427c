package pipeline

import "sync/atomic"

// Budget is the daemon-wide allowance of request body bytes held in
// memory at once (-buffer-budget): bodies read whole before they are
// sent, on the proxy face and by egress.request_upload. Take reserves,
// Give returns. Safe for concurrent use. Create with NewBudget.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget returns a budget of max bytes.
func NewBudget(max int) *Budget { return &Budget{max: int64(max)} }

// Max returns the budget's size in bytes.
func (b *Budget) Max() int { return int(b.max) }

// Take reserves n bytes and reports whether they fitted; when they did
// not, nothing is reserved.
func (b *Budget) Take(n int) bool {
	if b.used.Add(int64(n)) > b.max {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

// Give returns n bytes that Take reserved.
func (b *Budget) Give(n int) { b.used.Add(-int64(n)) }
