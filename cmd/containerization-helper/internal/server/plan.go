package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"hostkit.dev/cmd/containerization-helper/internal/image"
	"hostkit.dev/cmd/containerization-helper/internal/state"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// plan is container.plan: it checks the request as the mutation will,
// and stores a plan whose hash the mutation must present. A create plan
// verifies the image now (and the mutation verifies it again) and picks
// the container id.
func (s *Server) plan(ctx context.Context, call *rpc.Call, req *helperapi.PlanRequest) (*helperapi.PlanResponse, error) {
	rt, err := s.runtime(ctx)
	if err != nil {
		return nil, err
	}
	if !validKind(req.Kind) {
		return nil, invalid("kind must be create, start, restart or delete")
	}
	if err := s.checkContext(rt, req.Context); err != nil {
		return nil, err
	}
	if err := s.cfg.Store.CheckFence(req.Context.InstanceID, req.Context.Fence); err != nil {
		return nil, err
	}
	if err := rt.snap.Require(capsFor(req.Kind)...); err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	p := &Plan{Kind: req.Kind, Context: req.Context, PeerUID: call.Peer.UID, CreatedAt: now.UnixMilli(), ExpiresAt: now.UnixMilli() + helperapi.PlanTTLMS}
	switch req.Kind {
	case helperapi.KindCreate:
		if err := checkCreate(req); err != nil {
			return nil, err
		}
		if _, err := s.cfg.Images.Evidence(withPeer(ctx, call.Peer), *req.Image); err != nil {
			return nil, err
		}
		if p.ContainerID, err = newContainerID(); err != nil {
			return nil, err
		}
		p.Command, p.Env, p.Layout, p.ManifestDigest = req.Command, req.Env, req.Image.Layout, req.Image.ManifestDigest
	default:
		if req.Image != nil || len(req.Command) > 0 || len(req.Env) > 0 || req.Terminal {
			return nil, invalid("only a create plan takes image, command, env or terminal")
		}
		if req.Force && req.Kind != helperapi.KindDelete {
			return nil, invalid("only a delete plan takes force")
		}
		if req.StopTimeoutMS != 0 && (req.StopTimeoutMS < helperapi.MinStopTimeoutMS || req.StopTimeoutMS > helperapi.MaxStopTimeoutMS) {
			return nil, invalid("stop_timeout_ms must be %d..%d", helperapi.MinStopTimeoutMS, helperapi.MaxStopTimeoutMS)
		}
		if !validID(req.ContainerID) {
			return nil, wire.Errorf(CodeInvalidID, "container_id is not an id this helper makes")
		}
		if _, err := s.owned(ctx, req.ContainerID, req.Context); err != nil {
			return nil, err
		}
		p.ContainerID, p.Force, p.StopTimeoutMS = req.ContainerID, req.Force, req.StopTimeoutMS
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, wire.Wrap(wire.CodeInternal, "no randomness for a plan", err)
	}
	p.Nonce = hex.EncodeToString(nonce[:])
	contents, err := wire.Marshal(p)
	if err != nil {
		return nil, err
	}
	p.Hash = hashOf(contents)
	if err := s.cfg.Store.PutPlan(state.Plan{Hash: p.Hash, Contents: contents, Expires: time.UnixMilli(p.ExpiresAt)}); err != nil {
		return nil, err
	}
	return &helperapi.PlanResponse{ContainerID: p.ContainerID, ExpiresAt: p.ExpiresAt, Kind: p.Kind, PlanHash: p.Hash}, nil
}

// hashOf is "sha256:" + the hex SHA-256 of a plan's canonical encoding.
func hashOf(contents []byte) string {
	sum := sha256.Sum256(contents)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// checkCreate checks a create plan's image reference, command and
// environment. Messages name the rule, never a value (an argument or an
// environment value may be a secret).
func checkCreate(req *helperapi.PlanRequest) error {
	if req.Terminal {
		return invalid("terminal must be false: containers run detached, their output goes to the console log")
	}
	if req.Force || req.StopTimeoutMS != 0 || req.ContainerID != "" {
		return invalid("a create plan takes no container_id, force or stop_timeout_ms: the helper picks the id")
	}
	if req.Image == nil {
		return invalid("a create plan needs image")
	}
	l := req.Image.Layout
	if !filepath.IsAbs(l) || filepath.Clean(l) != l || strings.ContainsRune(l, 0) {
		return wire.Errorf(CodePathUnsafe, "image.layout must be an absolute, clean path")
	}
	if !validDigest(req.Image.ManifestDigest) {
		return invalid("image.manifest_digest must be sha256:<64 hex>")
	}
	if len(req.Command) == 0 || len(req.Command) > helperapi.MaxArgs || len(req.Env) > helperapi.MaxEnv {
		return invalid("command needs 1..%d arguments and env at most %d entries", helperapi.MaxArgs, helperapi.MaxEnv)
	}
	total := 0
	for i, a := range req.Command {
		if strings.ContainsRune(a, 0) || !utf8.ValidString(a) || (i == 0 && a == "") {
			return invalid("command argument %d is empty or holds NUL", i)
		}
		total += len(a)
	}
	seen := map[string]bool{}
	for i, e := range req.Env {
		k, _, ok := strings.Cut(e, "=")
		if !ok || k == "" || strings.ContainsAny(e, "\x00\n") || seen[k] {
			return invalid("env entry %d must be a unique KEY=value without NUL or newline", i)
		}
		seen[k] = true
		total += len(e)
	}
	if total > helperapi.MaxArgBytes {
		return invalid("command and env exceed %d bytes", helperapi.MaxArgBytes)
	}
	return nil
}

// annotations are the ownership annotations of a create plan.
func annotations(p *Plan, project string) map[string]string {
	return map[string]string{
		helperapi.AnnotationProject:  project,
		helperapi.AnnotationInstance: p.Context.InstanceID,
		helperapi.AnnotationFence:    strconv.FormatUint(p.Context.Fence, 10),
		helperapi.AnnotationPlan:     p.Hash,
	}
}

// takePlan loads the plan a mutation names and checks that it confirms
// exactly this mutation: kind, container id and context (plan.mismatch),
// made by the same peer user. The plan is consumed by the caller once the
// remaining checks pass.
func (s *Server) takePlan(call *rpc.Call, kind string, req *helperapi.MutationRequest) (*Plan, error) {
	if req.PlanHash == "" {
		return nil, wire.Errorf(helperapi.CodePlanRequired, "%s needs a plan_hash from container.plan", call.Op)
	}
	if !validDigest(req.PlanHash) {
		return nil, invalid("plan_hash must be sha256:<64 hex>")
	}
	rec, err := s.cfg.Store.Plan(req.PlanHash)
	if err != nil {
		return nil, err
	}
	// The stored plan must still hash to its name: a record edited on
	// disk confirms nothing.
	if hashOf(rec.Contents) != req.PlanHash {
		return nil, wire.Errorf(helperapi.CodePlanMismatch, "the stored plan does not match its hash")
	}
	p := &Plan{Hash: req.PlanHash}
	if err := wire.Unmarshal(rec.Contents, p, true); err != nil {
		return nil, wire.Wrap(helperapi.CodePlanMismatch, "the stored plan does not decode", err)
	}
	if p.Kind != kind || p.ContainerID != req.ContainerID || p.Context != req.Context || p.PeerUID != call.Peer.UID {
		return nil, wire.Errorf(helperapi.CodePlanMismatch, "the plan does not confirm this %s", call.Op)
	}
	return p, nil
}

// peerKey is the context key under which withPeer hands Images the peer
// an image layout is read for.
type peerKey struct{}

// withPeer returns ctx naming p as the peer an image layout is read for:
// the layout is read only as far as p could read it itself
// (image.Reader). Images.Evidence refuses a ctx without one.
func withPeer(ctx context.Context, p sock.Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// readerFrom returns the image.Reader for ctx's peer (nil for root).
// Without a peer it returns nil when need is false (the helper's own
// read), and fails when need is set. Errors:
// image.CodeNotFound (see image.ReaderOf), internal (no peer).
func readerFrom(ctx context.Context, need bool) (*image.Reader, error) {
	p, ok := ctx.Value(peerKey{}).(sock.Peer)
	if !ok {
		if need {
			return nil, wire.Errorf(wire.CodeInternal, "no peer to read the image layout for")
		}
		return nil, nil
	}
	return image.ReaderOf(p.UID, p.GID, p.PID)
}
