package server

import (
	"context"

	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/rpc"
)

// emptyRequest is the body of ops that take none: any field is
// request.unknown_field.
type emptyRequest struct{}

// credentialPut decodes its own body, not through handle: the value must
// be zeroed even when the body fails to decode part of the way.
func (s *Server) credentialPut(ctx context.Context, call *rpc.Call) (any, error) {
	req, err := rpc.Decode[secretdapi.CredentialPutRequest](call)
	defer secmem.Zero(req.Value)
	if err != nil {
		return nil, s.finish(ctx, call, err, nil)
	}
	fields := map[string]any{KeyCred: clip(req.Name)}
	meta, err := s.reg.Put(req)
	if err != nil {
		return nil, s.finish(ctx, call, err, fields)
	}
	fields["version"] = meta.Version
	fields["destinations"] = meta.Destinations
	fields["targets"] = targetNames(meta.Targets)
	return &secretdapi.CredentialPutResponse{CreatedAt: meta.CreatedAt, Name: meta.Name, UpdatedAt: meta.UpdatedAt,
		Version: meta.Version}, s.finish(ctx, call, nil, fields)
}

func (s *Server) credentialDelete(ctx context.Context, call *rpc.Call, req *secretdapi.CredentialDeleteRequest) (struct{}, error) {
	fields := map[string]any{KeyCred: clip(req.Name)}
	if err := s.reg.Delete(req.Name); err != nil {
		return struct{}{}, s.finish(ctx, call, err, fields)
	}
	return struct{}{}, s.finish(ctx, call, nil, fields)
}

func (s *Server) credentialList(ctx context.Context, call *rpc.Call, _ *emptyRequest) (*secretdapi.CredentialListResponse, error) {
	list := s.reg.List()
	return &secretdapi.CredentialListResponse{Credentials: list}, s.finish(ctx, call, nil, map[string]any{"count": len(list)})
}

func targetNames(ts []secretdapi.TargetSpec) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Target
	}
	return out
}

// clip bounds a caller-supplied string in an audit field.
func clip(s string) string { return audit.Clip(s, 64) }
