//go:build !linux

package demo

import (
	"errors"
	"syscall"
)

func sysProcAttr(bool) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }

const canScanProcs = false

type process struct {
	pid int
}

func processesWith(...string) []process { return nil }

// supported: egressd cannot verify a loopback listener's owner without
// /proc, so it refuses credentials to the demo's loopback API.
func supported() error {
	return errors.New("hostctl demo needs Linux: egressd refuses credentials to loopback servers where it cannot check their owner (docs/egressd.md)")
}
