//go:build !linux

package harness

import (
	"errors"
	"syscall"
)

// The suite needs Linux (namespaces, cgroups, runc/crun); elsewhere the
// harness builds but refuses to run.

func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func removeSuiteCgroups() []string { return nil }

func unmountUnder(string) (int, []string) { return 0, nil }

func hostMounts() ([]Mount, error) {
	return nil, errors.New("the conformance suite runs only on Linux")
}
