//go:build !linux

package proc

import (
	"time"

	"golang.org/x/sys/unix"
)

// BootID fails: not supported on this system.
func BootID() (string, error) { return "", ErrNotSupported }

// Identify fails: not supported on this system.
func Identify(pid int) (Identity, error) { return Identity{}, ErrNotSupported }

// Alive reports false: not supported on this system.
func Alive(id Identity) bool { return false }

// SignalVerified fails: not supported on this system.
func SignalVerified(id Identity, sig unix.Signal) error { return ErrNotSupported }

// Kill fails: not supported on this system.
func Kill(pid int, sig unix.Signal) error { return ErrNotSupported }

// GroupAlive reports false: not supported on this system.
func GroupAlive(pgid int) bool { return false }

// Descendants returns nothing: not supported on this system.
func Descendants(root int) []int { return nil }

// FreezeKill does nothing: not supported on this system.
func FreezeKill(root int) int { return 0 }

// WaitNone reports false: not supported on this system.
func WaitNone(root int, timeout time.Duration) bool { return false }
