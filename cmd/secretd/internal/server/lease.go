package server

import (
	"context"
	"time"

	"hostkit.dev/cmd/secretd/internal/credential"
	"hostkit.dev/cmd/secretd/internal/lease"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

func checkInvocation(inv string) error {
	if !credential.ValidInvocation(inv) {
		return wire.Errorf(secretdapi.CodeInvocationInvalid, "invocation must match [a-z0-9-]{1,64}")
	}
	return nil
}

// checkOwner checks an optional owner id and records it in fields.
// Errors: owner.invalid.
func checkOwner(owner string, fields map[string]any) error {
	if owner == "" {
		return nil
	}
	fields["owner"] = clip(owner)
	if !secretdapi.ValidOwner(owner) {
		return wire.Errorf(secretdapi.CodeOwnerInvalid, "owner must match [a-z0-9-]{1,64}")
	}
	return nil
}

// checkPlaceholder checks a stage's optional placeholder and records in
// fields that one was asked for (never the placeholder itself: audit
// records name leases by handle fingerprint). Errors: request.invalid.
func checkPlaceholder(ph string, fields map[string]any) error {
	if ph == "" {
		return nil
	}
	fields["placeholder_given"] = true
	if !secretdapi.ValidPlaceholder(ph) {
		return wire.Errorf(wire.CodeRequestInvalid, "placeholder must be hkp_ and 32 characters of [a-z2-7]")
	}
	return nil
}

// ttl applies the default and bounds of a stage's ttl_ms.
func ttl(ms int64) (time.Duration, error) {
	if ms == 0 {
		ms = secretdapi.DefaultTTLMS
	}
	if ms < secretdapi.MinTTLMS || ms > secretdapi.MaxTTLMS {
		return 0, wire.Errorf(secretdapi.CodeLeaseInvalidTTL, "ttl_ms must be %d..%d", secretdapi.MinTTLMS, secretdapi.MaxTTLMS)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

func (s *Server) leaseStage(ctx context.Context, call *rpc.Call, req *secretdapi.LeaseStageRequest) (*secretdapi.LeaseStageResponse, error) {
	fields := map[string]any{KeyCred: clip(req.Credential), "invocation": clip(req.Invocation)}
	if err := checkInvocation(req.Invocation); err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	if err := checkOwner(req.Owner, fields); err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	d, err := ttl(req.TTLMS)
	if err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	if err := checkPlaceholder(req.Placeholder, fields); err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	var st lease.Staged
	err = s.reg.With(req.Credential, func(meta *secretdapi.CredentialMeta, value []byte) error {
		spec, err := choose(meta, req)
		if err != nil {
			return err
		}
		spec.Invocation, spec.Owner, spec.TTL, spec.Stager, spec.Placeholder = req.Invocation, req.Owner, d, call.Peer, req.Placeholder
		fields["destination"], fields["target"] = spec.Destination, spec.Target
		st, err = s.table.Stage(spec, value)
		return err
	})
	if err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	fields["handle_fp"], fields["expires_at_ms"] = st.MAC.FP(), st.ExpiresAt
	return &secretdapi.LeaseStageResponse{ExpiresAt: st.ExpiresAt, Handle: st.Handle, Placeholder: st.Placeholder},
		s.finish(ctx, call, nil, fields)
}

// choose picks the destination and target of a stage: the ones asked for,
// which must be allowed, or the only allowed one when omitted. Errors:
// lease.destination_not_allowed, lease.target_not_allowed, lease.ambiguous.
func choose(meta *secretdapi.CredentialMeta, req *secretdapi.LeaseStageRequest) (lease.Spec, error) {
	spec := lease.Spec{Credential: meta.Name}
	switch {
	case req.Destination == "" && len(meta.Destinations) == 1:
		spec.Destination = meta.Destinations[0]
	case req.Destination == "":
		return spec, wire.Errorf(secretdapi.CodeLeaseAmbiguous, "credential %q allows %d destinations: name one", meta.Name, len(meta.Destinations))
	default:
		d, err := credential.CanonicalDestinations([]string{req.Destination})
		if err != nil || !contains(meta.Destinations, d[0]) {
			return spec, wire.Errorf(secretdapi.CodeLeaseDestinationDenied, "destination is not among credential %q's destinations", meta.Name)
		}
		spec.Destination = d[0]
	}
	var t *secretdapi.TargetSpec
	switch {
	case req.Target == "" && len(meta.Targets) == 1:
		t = &meta.Targets[0]
	case req.Target == "":
		return spec, wire.Errorf(secretdapi.CodeLeaseAmbiguous, "credential %q allows %d targets: name one", meta.Name, len(meta.Targets))
	default:
		for i := range meta.Targets {
			if meta.Targets[i].Target == req.Target {
				t = &meta.Targets[i]
			}
		}
		if t == nil {
			return spec, wire.Errorf(secretdapi.CodeLeaseTargetDenied, "target is not among credential %q's targets", meta.Name)
		}
	}
	spec.Target, spec.Template, spec.Overwrite, spec.BasicUser = t.Target, t.Template, t.Overwrite, t.BasicUser
	return spec, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (s *Server) leaseLookup(ctx context.Context, call *rpc.Call, req *secretdapi.LeaseLookupRequest) (*secretdapi.LeaseMeta, error) {
	meta, mac, err := s.table.Lookup(req.Handle)
	fields := map[string]any{"handle_fp": mac.FP()}
	if err != nil {
		if bogus(wire.CodeOf(err)) {
			return nil, s.finishBogus(ctx, call, err, fields)
		}
		return nil, s.finish(ctx, call, err, fields)
	}
	fields[KeyCred], fields["invocation"] = meta.Credential, meta.Invocation
	return &meta, s.finish(ctx, call, nil, fields)
}

func (s *Server) leaseRevoke(ctx context.Context, call *rpc.Call, req *secretdapi.LeaseRevokeRequest) (*secretdapi.LeaseRevokeResponse, error) {
	fields := map[string]any{"invocation": clip(req.Invocation)}
	if err := checkInvocation(req.Invocation); err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	if err := checkOwner(req.Owner, fields); err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	macs := s.table.Revoke(req.Invocation, req.Owner)
	fields["revoked"], fields["handle_fps"] = len(macs), fps(macs)
	return &secretdapi.LeaseRevokeResponse{Revoked: len(macs)}, s.finish(ctx, call, nil, fields)
}

func (s *Server) leaseList(ctx context.Context, call *rpc.Call, req *secretdapi.LeaseListRequest) (*secretdapi.LeaseListResponse, error) {
	fields := map[string]any{}
	if req.Invocation != "" {
		fields["invocation"] = clip(req.Invocation)
		if err := checkInvocation(req.Invocation); err != nil {
			return nil, s.finish(ctx, call, err, fields)
		}
	}
	if err := checkOwner(req.Owner, fields); err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	list := s.table.List(req.Invocation, req.Owner)
	fields["count"] = len(list)
	return &secretdapi.LeaseListResponse{Leases: list}, s.finish(ctx, call, nil, fields)
}

func fps(macs []lease.MAC) []string {
	out := make([]string, len(macs))
	for i, m := range macs {
		out[i] = m.FP()
	}
	return out
}
