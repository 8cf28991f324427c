// Package server maps egressd's ops (lib/api/egressdapi) onto the bundle
// registry and the pipeline: bundle.register, bundle.drop, bundle.list, egress.info,
// egress.request, egress.request_stream, egress.request_upload, egress.stats, and the bundle
// counts health reports.
package server

import (
	"context"
	"log/slog"
	"time"

	"hostkit.dev/cmd/egressd/internal/bundle"
	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// Server holds what the ops need.
type Server struct {
	Registry *bundle.Registry        // the bundles: register, drop, list, stats
	Pipeline *pipeline.Pipeline      // the request pipeline of egress.request and its streamed forms
	Audit    pipeline.Auditor        // the audit sink
	Logger   *slog.Logger            // the redacting logger
	Info     egressdapi.InfoResponse // epoch, proxy address and socket, CA bundle path
	// StreamIdle bounds the write of one frame of a streamed answer
	// (egress.request_stream) to a client that stopped reading
	// (-idle-timeout); past it the exchange ends as egress.client_closed.
	// Zero: DefaultStreamIdle.
	StreamIdle time.Duration
	// Budget is the daemon-wide buffer budget an egress.request_upload
	// body read whole takes from (shared with the proxy face).
	Budget *pipeline.Budget
	// MaxBody caps an egress.request_upload body read whole, in bytes
	// (-max-request-body; past it egress.too_large). Zero: 32 MiB.
	MaxBody int
}

// idle is StreamIdle or its default.
func (s *Server) idle() time.Duration {
	if s.StreamIdle <= 0 {
		return DefaultStreamIdle
	}
	return s.StreamIdle
}

// maxBody is MaxBody or its default.
func (s *Server) maxBody() int {
	if s.MaxBody <= 0 {
		return 32 << 20
	}
	return s.MaxBody
}

// Ops returns the op table (health is added by the caller).
func (s *Server) Ops() []rpc.Op {
	return []rpc.Op{
		{Name: egressdapi.OpBundleRegister, Roles: []rpc.Role{egressdapi.RoleStager}, Handler: rpc.Handle(s.register)},
		{Name: egressdapi.OpBundleDrop, Roles: []rpc.Role{egressdapi.RoleStager}, Handler: rpc.Handle(s.drop)},
		{Name: egressdapi.OpBundleList, Roles: []rpc.Role{egressdapi.RoleStager}, Handler: rpc.Handle(s.list)},
		{Name: egressdapi.OpEgressInfo, Roles: []rpc.Role{egressdapi.RoleStager}, Handler: rpc.Handle(s.info)},
		{Name: egressdapi.OpEgressRequest, Roles: []rpc.Role{egressdapi.RoleClient}, Handler: rpc.Handle(s.request)},
		{Name: egressdapi.OpEgressRequestStream, Roles: []rpc.Role{egressdapi.RoleClient}, Handler: rpc.Handle(s.requestStream), Stream: s.streamAnswer},
		{Name: egressdapi.OpEgressRequestUpload, Roles: []rpc.Role{egressdapi.RoleClient}, Handler: rpc.Handle(s.requestUpload), Stream: s.streamAnswer, Upload: true},
		{Name: egressdapi.OpEgressStats, Roles: []rpc.Role{egressdapi.RoleAdmin, egressdapi.RoleStager}, Handler: rpc.Handle(s.stats)},
	}
}

// HealthExtra returns the fields egressd adds to health: bundle and
// credential counts.
func (s *Server) HealthExtra(context.Context) map[string]any {
	b, c := s.Registry.Counts()
	return map[string]any{"bundles": b, "credentials": c}
}

func actor(call *rpc.Call) audit.Actor {
	return audit.Actor{UID: int(call.Peer.UID), PID: int(call.Peer.PID)}
}

func (s *Server) register(ctx context.Context, call *rpc.Call, req *egressdapi.BundleRegisterRequest) (*egressdapi.BundleRegisterResponse, error) {
	ctx = rpc.WithCorr(ctx, call.Corr)
	fields := map[string]any{"invocation": req.Invocation, "handles": len(req.Handles), "policy_rules": len(req.Policy.Allow)}
	if req.Owner != "" {
		fields["owner"] = audit.Clip(req.Owner, 64)
	}
	pair, err := s.Audit.Begin(ctx, audit.Record{Actor: actor(call), Op: egressdapi.OpBundleRegister, Corr: call.Corr, Fields: fields})
	if err != nil {
		return nil, wire.Wrap(wire.CodeInternal, "audit log unavailable", err)
	}
	b, err := s.Registry.Register(ctx, req)
	outcome := audit.OutcomeOK
	if err != nil {
		outcome = audit.OutcomeRefused
	} else {
		var names []string
		_ = b.Use(func(cs []*bundle.Credential) error {
			for _, c := range cs {
				names = append(names, c.Name+" → "+c.Destination.String()+" "+c.Target.String())
			}
			return nil
		})
		fields["leases"] = names
	}
	if _, aerr := pair.End(context.WithoutCancel(ctx), outcome, wire.CodeOf(err), fields); aerr != nil {
		s.Logger.Error("audit.append_failed", slog.String("op", egressdapi.OpBundleRegister), slog.Any("err", aerr))
	}
	s.Logger.Info(egressdapi.OpBundleRegister, slog.String("invocation", req.Invocation), slog.Int("handles", len(req.Handles)),
		slog.String("code", wire.CodeOf(err)), slog.String("corr", call.Corr))
	if err != nil {
		return nil, err
	}
	return &egressdapi.BundleRegisterResponse{Epoch: s.Info.Epoch}, nil
}

func (s *Server) drop(ctx context.Context, call *rpc.Call, req *egressdapi.BundleDropRequest) (*egressdapi.BundleDropResponse, error) {
	fields := map[string]any{"invocation": audit.Clip(req.Invocation, 64)}
	var err error
	if req.Owner != "" {
		fields["owner"] = audit.Clip(req.Owner, 64)
		if !secretdapi.ValidOwner(req.Owner) {
			err = wire.Errorf(egressdapi.CodeBundleInvalid, "owner must match [a-z0-9-]{1,64}")
		}
	}
	if err == nil {
		err = s.Registry.DropOwned(req.Invocation, req.Owner)
	}
	outcome := audit.OutcomeOK
	if err != nil {
		outcome = audit.OutcomeRefused
	}
	if _, aerr := s.Audit.Append(ctx, audit.Record{Actor: actor(call), Op: egressdapi.OpBundleDrop, Outcome: outcome,
		Code: wire.CodeOf(err), Corr: call.Corr, Fields: fields}); aerr != nil {
		s.Logger.Error("audit.append_failed", slog.String("op", egressdapi.OpBundleDrop), slog.Any("err", aerr))
	}
	s.Logger.Info(egressdapi.OpBundleDrop, slog.String("invocation", req.Invocation), slog.String("code", wire.CodeOf(err)))
	if err != nil {
		return nil, err
	}
	return &egressdapi.BundleDropResponse{}, nil
}

// list answers bundle.list: what each bundle is and whose, never its
// token, handles, placeholders or values.
func (s *Server) list(_ context.Context, call *rpc.Call, req *egressdapi.BundleListRequest) (*egressdapi.BundleListResponse, error) {
	if req.Invocation != "" && !bundle.ValidInvocation(req.Invocation) {
		return nil, wire.Errorf(egressdapi.CodeBundleInvalid, "invocation must match [a-z0-9-]{1,64}")
	}
	if req.Owner != "" && !secretdapi.ValidOwner(req.Owner) {
		return nil, wire.Errorf(egressdapi.CodeBundleInvalid, "owner must match [a-z0-9-]{1,64}")
	}
	out := s.Registry.List(req.Invocation, req.Owner)
	for i := range out {
		out[i].Epoch = s.Info.Epoch
	}
	return &egressdapi.BundleListResponse{Bundles: out}, nil
}

func (s *Server) info(context.Context, *rpc.Call, *struct{}) (*egressdapi.InfoResponse, error) {
	info := s.Info
	return &info, nil
}

func (s *Server) request(ctx context.Context, call *rpc.Call, req *egressdapi.RequestRequest) (*egressdapi.RequestResponse, error) {
	out, err := s.Pipeline.Do(ctx, input(req, call))
	if err != nil {
		return nil, err
	}
	return &egressdapi.RequestResponse{Status: out.Status, Headers: headers(out.Header), Body: out.Body}, nil
}

// input is the pipeline's input for an egress.request or
// egress.request_stream body.
func input(req *egressdapi.RequestRequest, call *rpc.Call) pipeline.Input {
	in := pipeline.Input{Invocation: req.Invocation, Method: req.Method, URL: req.URL, Body: req.Body, Actor: actor(call), Corr: call.Corr}
	for _, h := range req.Headers {
		in.Header = append(in.Header, request.Field{Name: h.Name, Value: h.Value})
	}
	return in
}

// headers converts the pipeline's sanitized fields for the wire.
func headers(fs []request.Field) []egressdapi.Header {
	var out []egressdapi.Header
	for _, h := range fs {
		out = append(out, egressdapi.Header{Name: h.Name, Value: h.Value})
	}
	return out
}

func (s *Server) stats(_ context.Context, call *rpc.Call, req *egressdapi.StatsRequest) (*egressdapi.StatsResponse, error) {
	st, err := s.Registry.Stats(req.Invocation)
	if err != nil {
		return nil, err
	}
	return &egressdapi.StatsResponse{Invocations: st}, nil
}
