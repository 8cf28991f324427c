//go:build unix

package transport

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// alive reports whether an idle connection can carry another request: its
// socket has nothing to read (no EOF, no stray bytes, no error). One
// non-blocking MSG_PEEK instead of net/http's reader goroutine parked on
// every idle connection; a close that races past it is what retryable is
// for.
func (c *conn) alive() bool {
	if c.raw == nil {
		return true
	}
	if c.peek == nil { // made once per connection: a closure passed to Read escapes
		c.peek = func(fd uintptr) bool {
			var b [1]byte
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			// EAGAIN: nothing to read. Else EOF, stray data or an error.
			c.peekAlive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
			return true // done: never wait for readability
		}
	}
	for range 2 {
		c.peekAlive = false
		err := c.raw.Read(c.peek)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// The last request's read deadline has passed while idle; the
			// runtime refuses raw reads until it is cleared.
			c.readBy(time.Time{})
			continue
		}
		return err == nil && c.peekAlive
	}
	return false
}
