package rpc

import (
	"context"
	"sync"
	"time"
)

// reqCtx is a handler's context: parent with the request's deadline. It
// behaves as context.WithDeadline(parent, deadline), but makes that
// context (and its timer) only when a handler asks for Done, or for a
// value other than the correlation id: most handlers only read Err and
// Deadline, which are answered from the clock and the parent.
type reqCtx struct {
	parent   context.Context
	deadline time.Time

	mu     sync.Mutex
	inner  context.Context // made on demand
	cancel context.CancelFunc
	err    error // set by stop before inner was made
}

func newReqCtx(parent context.Context, deadline time.Time) *reqCtx {
	return &reqCtx{parent: parent, deadline: deadline}
}

// materialize returns the real deadline context, making it on first use.
func (c *reqCtx) materialize() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		c.inner, c.cancel = context.WithDeadline(c.parent, c.deadline)
		if c.err != nil { // already stopped
			c.cancel()
		}
	}
	return c.inner
}

func (c *reqCtx) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *reqCtx) Done() <-chan struct{} { return c.materialize().Done() }

func (c *reqCtx) Err() error {
	c.mu.Lock()
	inner, err := c.inner, c.err
	c.mu.Unlock()
	if inner != nil {
		return inner.Err()
	}
	if err != nil {
		return err
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (c *reqCtx) Value(key any) any {
	if _, ok := key.(corrKey); ok {
		return c.parent.Value(key)
	}
	return c.materialize().Value(key) // e.g. context.Cause's lookup
}

// stop ends the context, like the CancelFunc of context.WithDeadline.
func (c *reqCtx) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner != nil {
		c.cancel()
		return
	}
	if c.err == nil {
		c.err = context.Canceled
		if !time.Now().Before(c.deadline) {
			c.err = context.DeadlineExceeded
		}
	}
}
