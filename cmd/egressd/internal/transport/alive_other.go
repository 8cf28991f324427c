//go:build !unix

package transport

// alive reports true: without a non-blocking peek, a closed idle
// connection shows when it is used, and retryable sends the request again.
func (c *conn) alive() bool { return true }
