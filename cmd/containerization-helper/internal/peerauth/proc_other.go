//go:build !linux

package peerauth

import (
	"errors"
	"os"
)

// errUnsupported: reading a peer's executable needs Linux's /proc; on
// other platforms every peer is refused and SelfCheck fails, so the
// helper cannot run there (it drives Linux OCI runtimes anyway).
var errUnsupported = errors.New("peerauth: needs Linux /proc")

func (a *Authenticator) inspect(pid int) (string, [32]byte, string) {
	return "", [32]byte{}, ReasonUnreadable
}

func hashPath(path string) ([32]byte, error) {
	if _, err := os.Stat(path); err != nil {
		return [32]byte{}, err
	}
	return [32]byte{}, errUnsupported
}

// SelfCheck is Linux only (see proc_linux.go).
type SelfCheck struct {
	Path   string   // as on Linux; never set here
	SHA256 [32]byte // as on Linux; never set here
}

// NewSelfCheck fails: the helper runs only on Linux.
func NewSelfCheck() (*SelfCheck, error) { return nil, errUnsupported }

// Check fails: the helper runs only on Linux.
func (s *SelfCheck) Check() error { return errUnsupported }
