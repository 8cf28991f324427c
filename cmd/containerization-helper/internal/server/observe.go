package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"hostkit.dev/cmd/containerization-helper/internal/provider"
	"hostkit.dev/cmd/containerization-helper/internal/state"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

func (s *Server) negotiate(ctx context.Context, _ *rpc.Call, req *helperapi.NegotiateRequest) (*helperapi.NegotiateResponse, error) {
	rt, err := s.runtime(ctx)
	if err != nil {
		return nil, err
	}
	if req.Provider != "" && req.Provider != rt.info.Name {
		return nil, wire.Errorf(provider.CodeUnavailable, "this helper drives %s, not the provider asked for", rt.info.Name)
	}
	if req.Codec != "" && req.Codec != rt.info.Codec {
		return nil, wire.Errorf(provider.CodeIncompatible, "the runtime's codec is %s, not the one asked for", rt.info.Codec)
	}
	return &helperapi.NegotiateResponse{
		Capabilities:     rt.snap.Capabilities(),
		CapabilityDigest: rt.snap.Digest(),
		Codec:            rt.info.Codec,
		HostKind:         rt.info.HostKind,
		ProjectID:        s.cfg.Store.ProjectID(),
		Provider:         rt.info.Name,
		Version:          rt.info.Version,
		Wrapped:          rt.info.Wrapped,
	}, nil
}

// observe reconciles the runtime's list of the helper-private root with
// the annotations and the helper's records. A container whose project
// annotation is not this helper's is foreign: listed by id, never
// touched. Both lists are sorted before the digest is taken.
func (s *Server) observe(ctx context.Context, _ *rpc.Call, _ *struct{}) (*helperapi.ObserveResponse, error) {
	if _, err := s.runtime(ctx); err != nil {
		return nil, err
	}
	out, err := s.reconcile(ctx)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Server) reconcile(ctx context.Context) (*helperapi.ObserveResponse, error) {
	list, err := s.cfg.Runtime.List(ctx)
	if err != nil {
		return nil, s.mapErr(ctx, err)
	}
	out := &helperapi.ObserveResponse{Containers: []helperapi.Container{}, Foreign: []string{}}
	for i := range list {
		st := &list[i]
		if st.Annotations[helperapi.AnnotationProject] != s.cfg.Store.ProjectID() {
			out.Foreign = append(out.Foreign, st.ID)
			continue
		}
		rec, ok, err := s.cfg.Store.Container(st.ID)
		if err != nil {
			return nil, err
		}
		var r *state.Container
		if ok {
			r = &rec
		}
		out.Containers = append(out.Containers, *s.containerOf(st, r))
	}
	slices.SortFunc(out.Containers, func(a, b helperapi.Container) int { return strings.Compare(a.ContainerID, b.ContainerID) })
	slices.Sort(out.Foreign)
	b, err := wire.Marshal(&struct {
		Containers []helperapi.Container `msgpack:"containers"`
		Foreign    []string              `msgpack:"foreign"`
	}{out.Containers, out.Foreign})
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	out.Digest = "sha256:" + hex.EncodeToString(sum[:])
	return out, nil
}

// containerOf describes an owned container. It is an orphan when it sits
// in created and the helper process that created it is gone (its record
// was last written before this process started), its create never
// finished, or the helper has no record of it.
func (s *Server) containerOf(st *provider.State, rec *state.Container) *helperapi.Container {
	c := &helperapi.Container{
		ContainerID: st.ID,
		InstanceID:  st.Annotations[helperapi.AnnotationInstance],
		Pid:         int64(st.Pid),
		Status:      string(st.Status),
		Phase:       helperapi.PhaseUntracked,
	}
	if !st.Created.IsZero() {
		c.CreatedAt = st.Created.UnixMilli()
	}
	c.Fence, _ = strconv.ParseUint(st.Annotations[helperapi.AnnotationFence], 10, 64)
	if rec != nil {
		c.Phase = string(rec.Phase)
	}
	c.Orphan = st.Status == provider.StatusCreated &&
		(rec == nil || rec.Phase != state.PhaseCreated || rec.Updated.Before(s.cfg.Started.Truncate(time.Millisecond)))
	return c
}

func (s *Server) evidence(ctx context.Context, call *rpc.Call, req *helperapi.ImageRef) (*helperapi.Evidence, error) {
	l := req.Layout
	if !strings.HasPrefix(l, "/") || cleanPath(l) != l {
		return nil, wire.Errorf(CodePathUnsafe, "layout must be an absolute, clean path")
	}
	if req.ManifestDigest != "" && !validDigest(req.ManifestDigest) {
		return nil, invalid("manifest_digest must be sha256:<64 hex>")
	}
	return s.cfg.Images.Evidence(withPeer(ctx, call.Peer), *req)
}

// ownedByProject reads id's state and checks only the project
// annotation: read-only ops serve any owned container.
func (s *Server) ownedByProject(ctx context.Context, id string) (*provider.State, error) {
	if !validID(id) {
		return nil, wire.Errorf(CodeInvalidID, "container_id is not an id this helper makes")
	}
	if _, err := s.runtime(ctx); err != nil {
		return nil, err
	}
	st, err := s.cfg.Runtime.State(ctx, id)
	if err != nil {
		return nil, s.mapErr(ctx, err)
	}
	if st.Annotations[helperapi.AnnotationProject] != s.cfg.Store.ProjectID() {
		return nil, wire.Errorf(helperapi.CodeContainerNotOwned, "the container is not this project's")
	}
	return st, nil
}

func (s *Server) usage(ctx context.Context, _ *rpc.Call, req *helperapi.IDRequest) (*helperapi.Usage, error) {
	st, err := s.ownedByProject(ctx, req.ContainerID)
	if err != nil {
		return nil, err
	}
	u := &helperapi.Usage{ContainerID: st.ID, Status: string(st.Status)}
	if st.Status != provider.StatusRunning && st.Status != provider.StatusPaused {
		return u, nil // a container that is not running has no live usage
	}
	stats, err := s.cfg.Runtime.Stats(ctx, st.ID)
	if err != nil {
		return nil, s.mapErr(ctx, err)
	}
	u.CPUTotalNS, u.MemoryBytes, u.Pids = stats.CPUTotalNS, stats.MemoryBytes, stats.Pids
	return u, nil
}

func (s *Server) logs(ctx context.Context, _ *rpc.Call, req *helperapi.LogsRequest) (*helperapi.LogsResponse, error) {
	n := req.MaxBytes
	if n == 0 {
		n = helperapi.DefaultLogBytes
	}
	st, err := s.ownedByProject(ctx, req.ContainerID)
	if err != nil {
		return nil, err
	}
	return tail(s.logPath(st.ID), n)
}

// tail reads the last n bytes of the console log at path, opened without
// following a symlink.
func tail(path string, n int64) (*helperapi.LogsResponse, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return &helperapi.LogsResponse{}, nil // the container wrote nothing yet
	}
	if err != nil {
		return nil, wire.Wrap(wire.CodeInternal, "console log cannot be opened", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, wire.Errorf(wire.CodeInternal, "console log is not a regular file")
	}
	size := fi.Size()
	off := max(size-n, 0)
	buf := make([]byte, size-off)
	k, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, wire.Wrap(wire.CodeInternal, "console log cannot be read", err)
	}
	return &helperapi.LogsResponse{Data: buf[:k], Size: size, Truncated: off > 0}, nil
}

func cleanPath(p string) string { return filepath.Clean(p) }
