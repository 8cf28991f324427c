//go:build linux

package netns

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// EgressConfig is what transparent egress needs of an instance.
type EgressConfig struct {
	ProxySocket string   // egressd's proxy.sock
	Invocation  string   // the instance id (the proxy user)
	Token       string   // the instance's proxy token ("": none, egressd answers 407)
	Allow       []string // the origins whose hosts the resolver answers for (patterns; bad ones are skipped)
	// Destinations are the origins of the instance's credentials'
	// destinations: the resolver answers for their hosts too, as egressd
	// lets the instance reach them whatever Allow says (Resolvable).
	Destinations []string
	MaxNames     int          // names the resolver gives addresses to; 0 = DefaultMaxNames
	Log          *slog.Logger // the holder's logger
}

// Egress is an instance's transparent egress: its resolver's names and
// refusals, and its namespace's counters.
type Egress struct {
	Names    *Names    // the synthetic addresses the resolver gave, by name
	Refusals *Refusals // the names the resolver refused, for supervisord's audit
	nsfd     int
}

// UDPDropped returns how many UDP datagrams the namespace's rules dropped.
func (e *Egress) UDPDropped() (uint64, error) { return udpDropped(e.nsfd) }

// TransparentEgress makes every outbound TCP connection of the namespace
// reach egressd, whatever the program (docs/supervisord.md, "Egress"): it
// adds default routes via lo, installs the nftables rules (nft_linux.go),
// and serves the resolver (DNS, 127.0.0.1:53 UDP and TCP) and the relay
// (Relay, 127.0.0.1 and [::1] port TransparentPort) until ctx ends; the
// returned channel is closed once they have all stopped. Errors:
// network.nftables_unavailable (the agent must not start without the
// rules), runtime.unavailable (a listener could not be opened).
func (ns *NS) TransparentEgress(ctx context.Context, cfg EgressConfig) (*Egress, <-chan struct{}, error) {
	var nsfd int
	err := ns.Do(func() (err error) {
		// The thread's own namespace file: the netlink sockets for the
		// rules and routes are opened in the namespace it names.
		nsfd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, nil, unavailable(fmt.Errorf("netns.TransparentEgress: %w", err))
	}
	fail := func(err error) (*Egress, <-chan struct{}, error) {
		unix.Close(nsfd)
		return nil, nil, err
	}
	if err := defaultRoutes(nsfd); err != nil {
		return fail(unavailable(err))
	}
	if err := installRules(nsfd, TransparentPort, 53); err != nil {
		return fail(err)
	}
	e := &Egress{Names: NewNames(cfg.MaxNames), nsfd: nsfd}
	dns := NewDNS(e.Names, Resolvable(cfg.Allow, cfg.Destinations), cfg.Log)
	e.Refusals = dns.Refusals()
	relay := &Relay{Names: e.Names, ProxySocket: cfg.ProxySocket, Log: cfg.Log, origDst: originalDst}
	if cfg.Token != "" {
		relay.Auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.Invocation+":"+cfg.Token))
	}
	var (
		pc      net.PacketConn
		dnsL    net.Listener
		relayLs []net.Listener
	)
	err = ns.Do(func() (err error) {
		if pc, err = net.ListenPacket("udp4", "127.0.0.1:53"); err != nil {
			return err
		}
		if dnsL, err = net.Listen("tcp4", "127.0.0.1:53"); err != nil {
			pc.Close()
			return err
		}
		for _, addr := range []string{"127.0.0.1", "::1"} {
			l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(TransparentPort)))
			if err != nil && addr == "::1" {
				continue // IPv6 is off in the namespace: nothing to redirect
			}
			if err != nil {
				pc.Close()
				dnsL.Close()
				return err
			}
			relayLs = append(relayLs, l)
		}
		return nil
	})
	if err != nil {
		return fail(unavailable(fmt.Errorf("netns.TransparentEgress: listen: %w", err)))
	}
	var wg sync.WaitGroup
	run := func(what string, f func() error) {
		wg.Go(func() {
			if err := f(); err != nil && !errors.Is(err, net.ErrClosed) {
				cfg.Log.Error("netns.egress", slog.String("server", what), slog.Any("err", err))
			}
		})
	}
	run("dns_udp", func() error { return dns.ServeUDP(ctx, pc) })
	run("dns_tcp", func() error { return dns.ServeTCP(ctx, dnsL) })
	for _, l := range relayLs {
		run("relay", func() error { return relay.Serve(ctx, l) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		unix.Close(nsfd)
		close(done)
	}()
	return e, done, nil
}

// ProbeNftables reports whether transparent egress can install its rules
// here: it creates a throwaway network namespace, installs the nftables
// table in it and lets the namespace go (it ends with its thread).
// supervisord runs it once at start, so that `hostctl doctor` names a
// missing nftables before an isolated instance fails on it. Errors:
// runtime.unavailable (no namespace can be made: not root),
// network.nftables_unavailable.
func ProbeNftables() error {
	ns, err := New()
	if err != nil {
		return err
	}
	defer ns.Close()
	var nsfd int
	if err := ns.Do(func() (err error) {
		nsfd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	}); err != nil {
		return unavailable(fmt.Errorf("netns.ProbeNftables: %w", err))
	}
	defer unix.Close(nsfd)
	return installRules(nsfd, TransparentPort, 53)
}
