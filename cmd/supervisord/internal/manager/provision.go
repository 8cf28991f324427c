package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"os"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/egress"
	"hostkit.dev/cmd/supervisord/internal/fault"
	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// DefaultPath is the agent's PATH when its request gives none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Provision creates an instance and, with req.Start, starts its holder.
// Idempotent on the instance id: the same request answers the instance's
// current status; a different one is instance.conflict.
//
// The first write is the provision intent (metadata.json, durable with
// its directory entries), before any lease is staged: whatever step a
// crash interrupts, reconcile finishes the provision (the agent was
// started) or undoes it (leases revoked, bundle dropped, directory
// removed; docs/supervisord.md, "Restart").
func (m *Manager) Provision(ctx context.Context, req *api.ProvisionRequest) (*api.Instance, error) {
	if err := m.normalize(req); err != nil {
		return nil, err
	}
	dg, err := digest(req)
	if err != nil {
		return nil, err
	}
	id := req.InstanceID
	unlock := m.lock(id)
	defer unlock()
	if req.Runtime == api.RuntimeContainer {
		return m.provisionContainer(ctx, dg, req) // container.go: the same contract, through the helper
	}
	if err := m.st.Create(id); err != nil {
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		md, lerr := m.st.Load(id)
		if lerr != nil {
			return nil, wire.Wrap(api.CodeInstanceExists, "an instance directory with this id exists but has no readable metadata", lerr)
		}
		if md.RequestDigest != dg {
			return nil, wire.Errorf(api.CodeInstanceConflict, "instance %s exists with a different request", id)
		}
		return m.statusLocked(ctx, md), nil
	}
	md, err := m.create(id, dg, req)
	if err == nil {
		md.Intent = m.provisionIntent(id, req)
		err = m.st.SaveIntent(md)
	}
	if err != nil {
		m.discard(id)
		return nil, err
	}
	fault.Point(fault.ProvisionIntent)
	grant := &egress.Grant{}
	if req.Start {
		grant, err = m.acquireEgress(ctx, req, md.Spec.Network) // all or nothing: a failure released what it staged
	} else {
		err = m.checkEgress(ctx, req)
	}
	if err != nil {
		m.discard(id)
		return nil, err
	}
	if err := m.writeEnv(md, grant); err != nil {
		m.releaseEgress(ctx, md)
		m.discard(id)
		return nil, err
	}
	if !req.Start {
		md.Intent = nil
		err := m.st.SaveAtomic(md)
		if err == nil {
			err = m.syncRecord(id)
		}
		if err != nil {
			m.discard(id)
			return nil, err
		}
	} else if err := m.spawn(ctx, md); err != nil {
		m.releaseEgress(ctx, md)
		md.Intent = nil
		md.State = api.StateExited
		md.Exit = &api.ExitStatus{Unknown: true}
		md.ExitedAt = time.Now().UnixMilli()
		_ = m.st.Save(md)
		return nil, err
	}
	m.cfg.Logger.Info("instance.provision", slog.String("instance", id), slog.String("state", md.State), slog.Int("agent_uid", md.Spec.AgentUID))
	return m.view(md, nil), nil
}

// provisionIntent is the intent of a provision of id: what it will stage
// and register under supervisord's owner id.
func (m *Manager) provisionIntent(id string, req *api.ProvisionRequest) *store.Intent {
	in := &store.Intent{Op: store.OpProvision, Nonce: newNonce(), CreatedAt: time.Now().UnixMilli(), Invocation: id}
	if m.cfg.Egress != nil && req.Start {
		in.Owner, in.Bundle = m.cfg.Egress.Owner(), true
		for _, c := range req.Credentials {
			in.Credentials = append(in.Credentials, c.Credential)
		}
	}
	return in
}

// discard removes a half-made instance of this process's own provision
// (nothing outside supervisord holds anything of it any more).
func (m *Manager) discard(id string) {
	if err := m.removeDir(id); err != nil {
		m.cfg.Logger.Error("instance.remove", slog.String("instance", id), slog.Any("err", err))
	}
	m.freeUID(id)
}

// create builds the metadata of a new instance: its agent uid and spec.
// It writes nothing; the request's environment is checked here, before
// anything is staged. Errors: uid.exhausted, instance.invalid.
func (m *Manager) create(id, dg string, req *api.ProvisionRequest) (*store.Metadata, error) {
	uid := -1
	if m.root {
		var err error
		if uid, err = m.allocUID(id); err != nil {
			return nil, err
		}
	}
	if _, err := store.EncodeEnv(m.agentEnv(id, req)); err != nil {
		return nil, wire.Wrap(api.CodeInstanceInvalid, "env keys and values must not hold NUL or newline, keys not '='", err)
	}
	now := time.Now().UnixMilli()
	md := &store.Metadata{
		ID: id, RequestDigest: dg, Request: *req, State: api.StateCreated,
		Session: api.SessionDirect, WatchAgent: api.WatchAgent(id), CreatedAt: now, UpdatedAt: now,
		Spec: store.Spec{
			Command: req.Command, WorkingDir: req.WorkingDir, PTY: req.PTY, Rows: req.PTYRows, Cols: req.PTYCols,
			SessionBackend: req.SessionBackend, Network: m.networkMode(req), AgentUID: uid,
			StopTimeoutMS: req.StopTimeoutMS, LogMaxMB: m.cfg.LogMaxMB, LogFiles: m.cfg.LogFiles,
		},
	}
	if req.Network != nil {
		md.Spec.Allow = req.Network.Allow
	}
	return md, m.backendSpec(md)
}

// writeEnv writes agent.env (atomically; spawn, or Provision without
// start, makes it durable) with grant's variables overriding the
// request's env, and records grant's bundle and, for network isolated,
// its destinations (which the resolver answers for, at every start of
// the holder and after adoption) in md (not yet saved).
func (m *Manager) writeEnv(md *store.Metadata, grant *egress.Grant) error {
	env := m.agentEnv(md.ID, &md.Request)
	maps.Copy(env, grant.Env)
	if grant.Env != nil {
		md.Egress = &grant.Record
	}
	if md.Spec.Network == api.NetworkIsolated {
		md.Spec.Destinations = grant.Destinations
	}
	b, err := store.EncodeEnv(env)
	if err != nil {
		return wire.Wrap(api.CodeInstanceInvalid, "env keys and values must not hold NUL or newline, keys not '='", err)
	}
	return store.WriteFileAtomic(m.st.Path(md.ID, store.FileAgentEnv), b, 0o600)
}

// syncRecord makes instance id's record durable: agent.env, metadata.json,
// the instance directory and its entry in the instances directory.
func (m *Manager) syncRecord(id string) error {
	return store.SyncAll(m.st.Path(id, store.FileAgentEnv), m.st.Path(id, store.FileMetadata), m.st.Dir(id), m.st.Root)
}

// agentEnv is the exact environment the agent gets (agent.env).
func (m *Manager) agentEnv(id string, req *api.ProvisionRequest) map[string]string {
	env := map[string]string{"PATH": DefaultPath, "HOME": req.WorkingDir, "LANG": "C.UTF-8"}
	for k, v := range req.Env {
		env[k] = v
	}
	if req.PTY && env["TERM"] == "" {
		env["TERM"] = "xterm-256color"
	}
	env["HOSTKIT_INSTANCE_ID"] = id
	env["HOSTKIT_WATCH_AGENT"] = api.WatchAgent(id)
	if req.Loadout != "" {
		env["HOSTKIT_LOADOUT"] = req.Loadout
	}
	if req.Profile != "" {
		env["HOSTKIT_PROFILE"] = req.Profile
	}
	kv := make([]string, 0, len(env))
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	out := map[string]string{}
	for _, s := range holder.StripEnv(kv) {
		for i := 0; i < len(s); i++ {
			if s[i] == '=' {
				out[s[:i]] = s[i+1:]
				break
			}
		}
	}
	return out
}

// allocUID picks the lowest agent uid in the range that no instance
// holds. The instances on disk are read once (the first allocation); from
// then on m.uids holds every uid given out, until destroy frees it.
func (m *Manager) allocUID(id string) (int, error) {
	m.uidMu.Lock()
	defer m.uidMu.Unlock()
	if !m.uidsLoaded {
		ids, _ := m.st.IDs()
		for _, other := range ids {
			if _, ok := m.uids[other]; ok || other == id {
				continue
			}
			if md, err := m.st.Load(other); err == nil {
				m.uids[other] = md.Spec.AgentUID
			}
		}
		m.uidsLoaded = true
	}
	used := map[int]bool{}
	for other, u := range m.uids {
		if other != id {
			used[u] = true
		}
	}
	for u := m.cfg.UIDMin; u <= m.cfg.UIDMax; u++ {
		if !used[u] {
			m.uids[id] = u
			return u, nil
		}
	}
	return 0, wire.Errorf(api.CodeUIDExhausted, "no free agent uid in %d-%d", m.cfg.UIDMin, m.cfg.UIDMax)
}

// freeUID forgets instance id's uid reservation.
func (m *Manager) freeUID(id string) {
	m.uidMu.Lock()
	defer m.uidMu.Unlock()
	delete(m.uids, id)
}

func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
