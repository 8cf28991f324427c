//go:build linux

package netns

import (
	"fmt"
	"net"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// NS is a network namespace held by one locked OS thread.
type NS struct {
	calls chan func()
	once  sync.Once
	done  chan struct{}
}

// New creates a network namespace with loopback up, held by a dedicated
// OS thread until Close. Errors: network.unavailable (not root, no
// CAP_SYS_ADMIN, or loopback could not be brought up).
func New() (*NS, error) {
	ns := &NS{calls: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: when this goroutine returns the runtime ends the
		// thread instead of reusing it with the namespace still entered.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- unavailable(fmt.Errorf("netns.New: unshare: %w", err))
			return
		}
		if err := loopbackUp(); err != nil {
			ready <- unavailable(err)
			return
		}
		ready <- nil
		for {
			select {
			case f := <-ns.calls:
				f()
			case <-ns.done:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return ns, nil
}

// loopbackUp sets IFF_UP on lo (SIOCGIFFLAGS/SIOCSIFFLAGS, netdevice(7)),
// on the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("netns.loopbackUp: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("netns.loopbackUp: SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("netns.loopbackUp: SIOCSIFFLAGS: %w", err)
	}
	return nil
}

// Do runs f on the namespace's thread and returns its error: sockets f
// opens and processes it starts (os/exec forks on the calling thread)
// belong to the namespace. f must not start goroutines that open sockets.
func (ns *NS) Do(f func() error) error {
	res := make(chan error, 1)
	select {
	case ns.calls <- func() { res <- f() }:
		return <-res
	case <-ns.done:
		return errClosed
	}
}

// Listen opens a TCP listener on addr inside the namespace.
func (ns *NS) Listen(addr string) (net.Listener, error) {
	var l net.Listener
	err := ns.Do(func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// Close ends the namespace's thread (the namespace lives on while a
// process or socket still uses it).
func (ns *NS) Close() { ns.once.Do(func() { close(ns.done) }) }
