package manager

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/fault"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// Crash recovery (docs/supervisord.md, "Restart"): every multi-step
// operation writes its intent (store.Intent) before its first step that
// reaches outside the instance directory, and reconcile finishes or
// undoes each intent it finds.

// Auditor writes one audit record (lib/audit's *Log).
type Auditor interface {
	Append(ctx context.Context, r audit.Record) (uint64, error)
}

// Audit ops of what reconcile and the owner sweep release on their own.
const (
	// AuditReclaim: an instance directory was removed by reconcile (a
	// provision undone, a directory without metadata, the trash).
	AuditReclaim = "instance.reclaim"
	// AuditEgressReclaim: leases or a bundle of supervisord's owner id
	// that no instance claims were released.
	AuditEgressReclaim = "egress.reclaim"
)

// audit writes one record of supervisord's own doing (actor: itself).
func (m *Manager) audit(ctx context.Context, op string, err error, fields map[string]any) {
	if m.cfg.Audit == nil {
		return
	}
	rec := audit.Record{Actor: audit.Actor{UID: os.Geteuid(), PID: os.Getpid()}, Op: op, Outcome: audit.OutcomeOK, Fields: fields}
	if err != nil {
		rec.Outcome, rec.Code = audit.OutcomeError, wire.CodeOf(err)
	}
	if _, aerr := m.cfg.Audit.Append(context.WithoutCancel(ctx), rec); aerr != nil {
		m.cfg.Logger.Error("audit.append_failed", slog.String("op", op), slog.Any("err", aerr))
	}
}

// reclaimed logs and audits the removal of instance directory name
// (err: the removal's failure, if any) with extra fields.
func (m *Manager) reclaimed(ctx context.Context, name, reason string, err error, extra map[string]any) {
	fields := map[string]any{"instance_id": name, "reason": reason}
	for k, v := range extra {
		fields[k] = v
	}
	m.audit(ctx, AuditReclaim, err, fields)
	if err != nil {
		m.cfg.Logger.Error("instance.reclaim", slog.String("instance", name), slog.String("reason", reason), slog.Any("err", err))
		return
	}
	m.cfg.Logger.Warn("instance.reclaimed", slog.String("instance", name), slog.String("reason", reason))
}

// newIntent is an intent of op on md (stop, destroy), naming its bundle.
func (m *Manager) newIntent(op string, md *store.Metadata) *store.Intent {
	in := &store.Intent{Op: op, Nonce: newNonce(), CreatedAt: time.Now().UnixMilli(), Invocation: md.ID}
	if m.cfg.Egress != nil && md.Egress != nil && md.Egress.Registered {
		in.Owner, in.Bundle, in.Credentials = m.cfg.Egress.Owner(), true, md.Egress.Credentials
	}
	return in
}

// beginIntent makes op's intent durable in md, unless md already carries
// it (a restart finishing the operation).
func (m *Manager) beginIntent(op string, md *store.Metadata) error {
	if md.Intent != nil && md.Intent.Op == op {
		return nil
	}
	md.Intent = m.newIntent(op, md)
	return m.st.SaveIntent(md)
}

// removeDir removes instance id's directory through the trash (one
// durable rename, then the deletion) and its run files.
func (m *Manager) removeDir(id string) error {
	trash, err := m.st.Trash(id)
	if err != nil || trash == "" {
		return err
	}
	fault.Point(fault.DestroyTrashed)
	os.Remove(m.sockPath(id))
	os.Remove(m.sockPath(id) + ".lock")
	os.Remove(m.tmuxSockPath(id)) // left behind when a tmux server was killed
	return os.RemoveAll(trash)
}

// resolveIntent finishes or undoes md's intent (Reconcile, instance lock
// held): a provision is finished when its agent (or container) was
// started, else undone; a stop or destroy is queued for RunRecovery.
func (m *Manager) resolveIntent(ctx context.Context, md *store.Metadata) {
	switch md.Intent.Op {
	case store.OpProvision:
		if isContainer(md) {
			m.resolveContainerProvision(ctx, md) // container.go
			return
		}
		if m.holderTook(md) {
			md.Intent = nil
			m.reconcile(ctx, md)
			_ = m.st.Save(md)
			m.cfg.Logger.Warn("instance.provision_finished", slog.String("instance", md.ID), slog.String("state", md.State))
			return
		}
		m.undoProvision(ctx, md)
	default: // stop, destroy
		m.rec.mu.Lock()
		m.rec.finish = append(m.rec.finish, md.ID)
		m.rec.mu.Unlock()
	}
}

// undoProvision undoes md's provision, whose agent never started: its
// leases are revoked and its bundle dropped (by supervisord's owner id,
// never another owner's), its directory removed; audited. A release that
// a daemon did not answer is left to the owner sweep, which retries.
func (m *Manager) undoProvision(ctx context.Context, md *store.Metadata) {
	in := md.Intent
	extra := map[string]any{"op": store.OpProvision}
	if eg := m.cfg.Egress; eg != nil && in != nil && (in.Bundle || len(in.Credentials) > 0) {
		n, dropped, err := eg.ReleaseLeftover(ctx, md.ID, len(in.Credentials) > 0, in.Bundle)
		extra["leases_revoked"], extra["bundle_dropped"] = n, dropped
		if err != nil {
			extra["release_code"] = wire.CodeOf(err)
			m.rec.due.Store(true)
		}
	}
	err := m.removeDir(md.ID)
	m.freeUID(md.ID)
	m.reclaimed(ctx, md.ID, "provision_undone", err, extra)
}

// reclaimBroken handles an instance directory whose metadata.json cannot
// be loaded (Reconcile, instance lock held). Missing or not JSON (a crash
// between the directory's mkdir and its first write, which is the
// provision intent, so nothing was staged yet; or a record lost with the
// host) and no holder: the directory is removed. A holder that runs, or
// metadata of another schema version, is left for destroy, logged.
func (m *Manager) reclaimBroken(ctx context.Context, id string, lerr error) {
	var se *json.SyntaxError
	broken := errors.Is(lerr, os.ErrNotExist) || errors.As(lerr, &se)
	if !broken || m.h.alive(id) {
		m.cfg.Logger.Warn("instance.unreadable", slog.String("instance", id), slog.Any("err", lerr))
		return
	}
	err := m.removeDir(id)
	m.freeUID(id)
	m.reclaimed(ctx, id, "no_metadata", err, nil)
}

// recovery is what RunRecovery and the sweep still have to do.
type recovery struct {
	mu         sync.Mutex
	finish     []string        // stop and destroy intents left by an earlier process
	unresolved map[string]bool // container provision intents the helper could not settle yet
	due        atomic.Bool     // the owner sweep must run (again)
}

// RunRecovery finishes, until ctx ends, the stop and destroy intents
// Reconcile found: each instance's tree is stopped, its egress released
// and (destroy) its directory removed, under its lock, one goroutine per
// instance (a stop may wait for the stop timeout).
func (m *Manager) RunRecovery(ctx context.Context) {
	m.rec.mu.Lock()
	ids := m.rec.finish
	m.rec.finish = nil
	m.rec.mu.Unlock()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() { m.finishIntent(ctx, id) })
	}
	wg.Wait()
	<-ctx.Done()
}

// finishIntent finishes instance id's stop or destroy intent.
func (m *Manager) finishIntent(ctx context.Context, id string) {
	unlock := m.lock(id)
	defer unlock()
	md, err := m.st.Load(id)
	if err != nil || md.Intent == nil {
		return
	}
	var ferr error
	op := md.Intent.Op
	switch {
	case op == store.OpStop && isContainer(md):
		_, ferr = m.stopContainer(ctx, md)
	case op == store.OpStop:
		m.stopLocked(ctx, md)
	case op == store.OpDestroy && isContainer(md):
		ferr = m.destroyContainer(ctx, md)
	case op == store.OpDestroy:
		ferr = m.destroyLocked(ctx, md)
	default:
		return
	}
	m.cfg.Logger.Warn("instance.intent_finished", slog.String("instance", id), slog.String("op", op), slog.String("code", wire.CodeOf(ferr)))
}

// dirExists reports whether instance id has a directory.
func (m *Manager) dirExists(id string) bool {
	fi, err := os.Stat(filepath.Join(m.st.Root, id))
	return err == nil && fi.IsDir()
}
