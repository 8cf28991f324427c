//go:build !linux

package state

import "os"

// fdatasync is fsync where fdatasync(2) is not available.
func fdatasync(f *os.File) error { return f.Sync() }

// preallocate sets f's size (no fallocate(2) here).
func preallocate(f *os.File, n int64) error { return f.Truncate(n) }
