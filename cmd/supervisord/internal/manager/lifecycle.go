package manager

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// holderTimeout bounds a status call to a holder.
const holderTimeout = 3 * time.Second

func terminal(state string) bool { return state == api.StateStopped || state == api.StateExited }

// load reads instance id's metadata. instance.not_found when missing.
func (m *Manager) load(id string) (*store.Metadata, error) {
	id, err := api.CanonicalID(id)
	if err != nil {
		return nil, err
	}
	md, err := m.st.Load(id)
	if errors.Is(err, os.ErrNotExist) {
		return nil, wire.Errorf(api.CodeInstanceNotFound, "no instance %s", id)
	}
	return md, err
}

// reconcile brings md up to date with what is on disk and alive, and
// saves it; the caller holds the instance lock. A live holder is adopted;
// a finished one yields its exit.json; a dead one without exit.json leaves
// an exited(unknown) instance, and an agent that outlived it (identity
// verified) is killed — nothing is signalled on an identity mismatch.
func (m *Manager) reconcile(ctx context.Context, md *store.Metadata) {
	if terminal(md.State) {
		return
	}
	if isContainer(md) {
		m.reconcileContainer(ctx, md) // container.go
		return
	}
	id := md.ID
	var ex store.ExitRecord
	if err := m.st.ReadJSON(id, store.FileExit, &ex); err == nil {
		m.applyExit(md, &ex)
		return
	}
	var hr store.HolderRecord
	haveRec := m.st.ReadJSON(id, store.FileHolder, &hr) == nil
	if haveRec && md.Agent.PID == 0 {
		// Crash between spawn and metadata: the holder's record wins.
		md.Holder, md.Agent, md.PGID, md.StartedAt = hr.Holder, hr.Agent, hr.PGID, hr.StartedAt
		md.State = api.StateRunning
	}
	if m.h.alive(id) {
		if s, err := m.h.status(ctx, id); err == nil && !terminal(s.State) {
			md.State = s.State
			md.Restarts = int(s.Restarts)
		}
		if haveRec && hr.Agent.PID != 0 && hr.StartedAt >= md.StartedAt {
			// An on-failure restart: the holder's record names the agent now.
			md.Agent, md.PGID = hr.Agent, hr.PGID
		}
		md.UpdatedAt = time.Now().UnixMilli()
		_ = m.st.Save(md)
		return
	}
	if md.State == api.StateCreated && (md.Intent == nil || md.Intent.Op != "") {
		// Only an older version's spawn intent (in metadata.json or
		// intent.json) says a start was asked for; a provision intent of
		// this version is resolved before (resolveIntent).
		var in store.Intent
		if md.Intent != nil || m.st.ReadJSON(id, store.FileIntent, &in) != nil {
			return // never started
		}
	}
	// The exit record may have landed while we looked.
	if err := m.st.ReadJSON(id, store.FileExit, &ex); err == nil {
		m.applyExit(md, &ex)
		return
	}
	killed := m.h.killOrphan(md)
	m.cfg.Logger.Warn("instance.holder_lost", slog.String("instance", id), slog.Bool("orphan_killed", killed))
	md.State = api.StateExited
	md.Exit = &api.ExitStatus{Unknown: true}
	md.ExitedAt = time.Now().UnixMilli()
	md.UpdatedAt = md.ExitedAt
	_ = m.st.Save(md)
}

func (m *Manager) applyExit(md *store.Metadata, ex *store.ExitRecord) {
	md.State = api.StateExited
	if ex.Stopped {
		md.State = api.StateStopped
	}
	e := ex.Exit
	md.Exit = &e
	md.ExitedAt = ex.ExitedAt
	md.Restarts = ex.Restarts
	md.UpdatedAt = time.Now().UnixMilli()
	_ = m.st.Save(md)
}

// Reconcile reconciles every entry of the instances directory (at
// start, before supervisord serves): every directory is an instance or
// is reclaimed (docs/supervisord.md, "Restart"). An instance left with
// an intent has it finished or undone (a stop or destroy is finished in
// the background by RunRecovery: its holder may take the stop timeout);
// a directory without metadata (a crash between its mkdir and the
// provision intent) and a directory left in the trash are removed. Then
// the owner sweep releases the leases and bundles of supervisord's owner
// id that no instance claims.
func (m *Manager) Reconcile(ctx context.Context) {
	ents, err := m.st.Entries()
	if err != nil {
		m.cfg.Logger.Error("instance.reconcile", slog.Any("err", err))
		return
	}
	for _, e := range ents {
		switch {
		case e.Trash:
			err := os.RemoveAll(filepath.Join(m.st.Root, e.Name))
			m.reclaimed(ctx, e.Name, "trash", err, nil)
		case e.ID == "" || !e.Dir:
			// Not a name supervisord makes: it blocks no instance id.
			m.cfg.Logger.Warn("instance.foreign_entry", slog.String("name", e.Name))
		default:
			m.reconcileDir(ctx, e.ID)
		}
	}
	m.sweepOwned(ctx)
}

// reconcileDir is Reconcile of instance directory id.
func (m *Manager) reconcileDir(ctx context.Context, id string) {
	unlock := m.lock(id)
	defer unlock()
	md, err := m.st.Load(id)
	if err != nil {
		m.reclaimBroken(ctx, id, err)
		return
	}
	m.readopt(md) // container instances: raise the fence (container.go)
	if md.Intent != nil && md.Intent.Op != "" {
		m.resolveIntent(ctx, md)
		return
	}
	m.reconcile(ctx, md)
	m.cfg.Logger.Info("instance.reconciled", slog.String("instance", id), slog.String("state", md.State))
}
