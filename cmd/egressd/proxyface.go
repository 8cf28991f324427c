package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/proxy"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/sock"
)

// proxyFace is the proxy face's listeners and CA, set up before the
// pipeline so that the transport knows egressd's own address.
type proxyFace struct {
	tcp   net.Listener
	unix  *sock.Listener
	bound netip.AddrPort // the TCP listener's real address (port 0 resolved)
	ca    *proxy.CA
}

// openProxyFace loads or creates the local CA, writes the public CA
// bundle (0644 in the 0755 public directory) and opens the TCP listener
// and <run>/egressd/proxy.sock (0600, same-user). The caller closes both
// listeners on error paths; the proxy server closes them when it stops.
func openProxyFace(ctx context.Context, env *daemon.Env, cfg *Config) (*proxyFace, error) {
	log := env.Logger
	if err := env.Layout.EnsurePublic(); err != nil {
		return nil, fmt.Errorf("public directory: %w", err)
	}
	ca, err := proxy.LoadOrCreateCA(env.Layout.StateDir(daemon.NameEgressd))
	if err != nil {
		return nil, err
	}
	roots, err := ca.WriteBundle(cfg.CABundlePath, cfg.ExtraCAPEM)
	if err != nil {
		return nil, err
	}
	if !roots {
		log.Warn("proxy.no_system_roots", slog.String("ca_bundle", cfg.CABundlePath))
	}
	if !cfg.ProxyAddress.Addr().IsLoopback() {
		log.Warn("proxy.non_loopback_listener", slog.String("address", cfg.ProxyAddress.String()))
	}
	tl, err := net.Listen("tcp", cfg.ProxyAddress.String())
	if err != nil {
		return nil, fmt.Errorf("proxy listener: %w", err)
	}
	bound, err := netip.ParseAddrPort(tl.Addr().String())
	if err != nil {
		tl.Close()
		return nil, fmt.Errorf("proxy listener address: %w", err)
	}
	ul, err := sock.Listen(ctx, sock.Config{Path: cfg.ProxySocket, Group: -1})
	if err != nil {
		tl.Close()
		return nil, fmt.Errorf("proxy socket: %w", err)
	}
	return &proxyFace{tcp: tl, unix: ul, bound: netip.AddrPortFrom(bound.Addr().WithZone("").Unmap(), bound.Port()), ca: ca}, nil
}

func (f *proxyFace) close() {
	f.tcp.Close()
	f.unix.Close()
}

// actors returns the run-group members serving both listeners.
func (f *proxyFace) actors(srv *proxy.Server) []daemon.Actor {
	stop := func(error) { srv.Close() }
	return []daemon.Actor{
		{Execute: func() error { return srv.Serve(f.tcp, "tcp") }, Interrupt: stop},
		{Execute: func() error { return srv.Serve(f.unix, "unix") }, Interrupt: stop},
	}
}

// anonymousBundle returns the anonymous bundle, or nil when the operator
// did not enable anonymous use.
func anonymousBundle(cfg *Config) (*bundle.Bundle, error) {
	if cfg.Anonymous == nil {
		return nil, nil
	}
	b, err := bundle.NewAnonymous(*cfg.Anonymous)
	if err != nil {
		return nil, fmt.Errorf("-proxy-anonymous-allow: %w", err)
	}
	return b, nil
}
