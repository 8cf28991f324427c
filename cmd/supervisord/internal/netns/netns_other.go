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
	ProxySocket, Invocation, Token string       // as on Linux
	Allow, Destinations            []string     // as on Linux
	MaxNames                       int          // as on Linux
	Log                            *slog.Logger // as on Linux
}

// Egress is an instance's transparent egress; none exists on this system.
type Egress struct {
	Names    *Names    // as on Linux; never set here
	Refusals *Refusals // as on Linux; never set here
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
