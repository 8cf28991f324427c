//go:build !linux

package netns

import (
	"errors"
	"net"
)

// NS is a network namespace; none exists on this system.
type NS struct{}

// New fails with runtime.unavailable: network namespaces need Linux.
func New() (*NS, error) { return nil, unavailable(errors.New("netns: needs Linux")) }

// Do fails: there is no namespace.
func (ns *NS) Do(f func() error) error { return errClosed }

// Listen fails: there is no namespace.
func (ns *NS) Listen(addr string) (net.Listener, error) { return nil, errClosed }

// Close does nothing.
func (ns *NS) Close() {}
