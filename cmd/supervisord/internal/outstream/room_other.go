//go:build !linux

package outstream

import "syscall"

// sendBufferSize reports false: only Linux's accounting is known (see
// skbSlack), so elsewhere a Writer's writes may block (blockTimeout).
func sendBufferSize(syscall.RawConn) (int, bool) { return 0, false }

// sendQueued is never called where sendBufferSize reports false.
func sendQueued(uintptr) (int, error) { return 0, nil }
