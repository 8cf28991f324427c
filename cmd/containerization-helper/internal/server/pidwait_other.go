//go:build !linux

package server

import (
	"context"
	"errors"
	"syscall"
	"time"
)

// pidWaiter is unavailable here: the helper runs on Linux only.
type pidWaiter struct{}

// openPidWaiter fails: there is no pidfd on this platform.
func openPidWaiter(int) (*pidWaiter, error) {
	return nil, errors.New("server: no pidfd on this platform")
}

func (*pidWaiter) wait(context.Context, time.Time) (bool, error) { return false, nil }
func (*pidWaiter) close()                                        {}
func (*pidWaiter) signal(syscall.Signal) error                   { return syscall.ENOSYS }
