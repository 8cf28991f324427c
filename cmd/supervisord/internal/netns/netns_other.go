//go:build !linux

package netns

import (
	"context"
	"errors"
	"log/slog"
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

// EgressConfig is what transparent egress needs of an instance.
type EgressConfig struct {
	ProxySocket, Invocation, Token string
	Allow, Destinations            []string
	MaxNames                       int
	Log                            *slog.Logger
}

// Egress is an instance's transparent egress; none exists on this system.
type Egress struct {
	Names    *Names
	Refusals *Refusals
}

// ProbeNftables fails with runtime.unavailable: network namespaces need
// Linux.
func ProbeNftables() error { return unavailable(errors.New("netns: needs Linux")) }

// TransparentEgress fails: there is no namespace.
func (ns *NS) TransparentEgress(ctx context.Context, cfg EgressConfig) (*Egress, <-chan struct{}, error) {
	return nil, nil, errClosed
}

// Probe fails with network.unavailable: namespaces need Linux.
func Probe() error { return unavailable(errors.New("netns: needs Linux")) }

// PrivateEtc fails: there is no namespace.
func (ns *NS) PrivateEtc(dir string) error { return errClosed }
