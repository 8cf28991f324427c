package main

import (
	"context"
	"io"
	"log/slog"
	"net/netip"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/loopowner"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/proxy"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/cmd/egressd/internal/server"
	"hostkit.dev/cmd/egressd/internal/transport"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
)

// run parses args, builds the daemon and serves until ctx ends. Flags may
// also come from $EGRESSD_<FLAG> and the config file.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		f    flags
		cfg  *Config
		anon *bundle.Bundle
	)
	return daemon.Run(ctx, daemon.Spec{
		Binary:       "egressd",
		Name:         daemon.NameEgressd,
		Roles:        []rpc.Role{egressdapi.RoleStager, egressdapi.RoleClient, egressdapi.RoleAdmin},
		HoldsSecrets: true,
		Flags:        f.register,
		Configure: func(env *daemon.Env, _ *daemon.Service) (err error) {
			if cfg, err = f.config(env.Layout); err != nil {
				return err
			}
			anon, err = anonymousBundle(cfg)
			return err
		},
		Serve: func(ctx context.Context, env *daemon.Env, svc *daemon.Service) error {
			return serve(ctx, env, svc, cfg, anon)
		},
	}, args, stdout, stderr)
}

// serve builds egressd on the socket daemon.Run took (so a second egressd
// on this root has stopped with sock.already_running before it binds the
// proxy port, writes the CA files or opens the audit log) and serves
// until ctx ends.
func serve(ctx context.Context, env *daemon.Env, svc *daemon.Service, cfg *Config, anon *bundle.Bundle) error {
	face, err := openProxyFace(ctx, env, cfg)
	if err != nil {
		return err
	}
	defer face.close()
	al, err := openAudit(env, cfg.AuditFsync)
	if err != nil {
		return err
	}
	defer al.Close()

	secretd := rpc.NewClient(cfg.SecretdSocket, 0)
	defer secretd.Close()
	reg := bundle.NewRegistry(secretdapi.NewClient(secretd), env.Scrubber)
	defer reg.DropAll()
	to := cfg.Timeouts
	for _, w := range to.Renamed {
		env.Logger.Warn("egressd.flag_renamed", slog.String("msg", w))
	}
	tr := transport.New(transport.Config{HostMap: cfg.HostMap, RootCAs: cfg.RootCAs, Forbidden: []netip.AddrPort{face.bound},
		DialTimeout: to.Dial, TLSHandshakeTimeout: to.TLSHandshake, ResponseHeaderTimeout: to.ResponseHeader})
	defer tr.Close()
	p := pipeline.New(pipeline.Config{
		Registry: reg, Transport: tr, Owner: cfg.Owner, Audit: al, Logger: env.Logger,
		Limits:      request.Limits{MaxBody: cfg.MaxBody},
		MaxResponse: cfg.MaxResponse, IdleTimeout: to.Idle, TotalTimeout: to.Total, StripResponse: cfg.Strip,
	})
	// One buffer budget for every body read whole, on either face.
	budget := pipeline.NewBudget(cfg.BufferBudget)
	srv := &server.Server{Registry: reg, Pipeline: p, Audit: al, Logger: env.Logger, Info: egressdapi.InfoResponse{
		CABundlePath: cfg.CABundlePath, Epoch: env.Epoch, ProxyAddress: face.bound.String(), ProxySocket: cfg.ProxySocket,
	}, StreamIdle: to.Idle, Budget: budget, MaxBody: cfg.MaxBody}
	px := proxy.New(proxy.Config{
		Registry: reg, Pipeline: p, Transport: tr, CA: face.ca, Audit: al, Logger: env.Logger, Anonymous: anon,
		MaxTunnels: cfg.Proxy.MaxTunnels, HandshakeTimeout: cfg.Proxy.Handshake, IdleTimeout: cfg.Proxy.Idle,
		ExchangeIdle: to.Idle, BufferBudget: cfg.BufferBudget, Budget: budget, MaxHeaderBytes: cfg.Proxy.MaxHeader, MaxBody: cfg.MaxBody,
		AuthAuditRate: cfg.Proxy.AuthAuditRate, AuthAuditBurst: int(max(1, 5*cfg.Proxy.AuthAuditRate)),
		MaxTunnelsPerInvocation: cfg.Proxy.InvTunnels, MaxRequestsPerInvocation: cfg.Proxy.InvRequests, MaxConns: cfg.Proxy.MaxConns,
		MaxStreamsPerInvocation: cfg.Proxy.InvStreams, ReregisterGrace: cfg.Proxy.ReregisterGrace,
	})
	defer px.Close()
	// secretd's socket is logged as broker_socket: a key that names
	// "secret" is redacted by the handler's key rule.
	env.Logger.Info("egressd.config", slog.String(daemon.KeyEpoch, env.Epoch), slog.Int("host_map", len(cfg.HostMap)),
		slog.String("broker_socket", cfg.SecretdSocket), slog.Bool("loopback_owner_check", loopowner.Available),
		slog.String("proxy_address", face.bound.String()), slog.String("proxy_socket", cfg.ProxySocket),
		slog.String("ca_bundle", cfg.CABundlePath), slog.Bool("proxy_anonymous", anon != nil))
	svc.Audit = daemon.AuditSink(al, env.Logger)
	svc.Ops = append(srv.Ops(), daemon.Health(env.Epoch, env.Started, srv.HealthExtra))
	// egress.request answers can be slow: the caller's deadline bounds
	// them (lib/rpc), up to 10 minutes. Each open egress.request_stream
	// or egress.request_upload holds one of these connections until its
	// answer ends.
	svc.RPC = rpc.Config{MaxConns: 256}
	svc.Actors = face.actors(px)
	return svc.Run(ctx)
}

// openAudit opens <log>/egressd/audit.jsonl with the chosen fsync policy.
func openAudit(env *daemon.Env, fsync bool) (*audit.Log, error) {
	if fsync {
		return daemon.OpenAudit(env.Layout, daemon.NameEgressd, env.Scrubber)
	}
	return audit.Open(audit.Options{Dir: env.Layout.LogDir(daemon.NameEgressd), Name: daemon.AuditFile,
		Daemon: daemon.NameEgressd, Scrubber: env.Scrubber, Fsync: audit.FsyncNever})
}
