//go:build !linux

package netns

import (
	"errors"
	"net"
)

// NS is a network namespace; none exists on this system.
type NS struct{}

// New fails with network.unavailable: network namespaces need Linux.
func New() (*NS, error) { return nil, unavailable(errors.New("netns: needs Linux")) }

// Do fails: there is no namespace.
func (ns *NS) Do(f func() error) error { return errClosed }

// Listen fails: there is no namespace.
func (ns *NS) Listen(addr string) (net.Listener, error) { return nil, errClosed }

// Close does nothing.
func (ns *NS) Close() {}

// Probe fails with network.unavailable: namespaces need Linux.
func Probe() error { return unavailable(errors.New("netns: needs Linux")) }

// PrivateEtc fails: there is no namespace.
func (ns *NS) PrivateEtc(dir string) error { return errClosed }
