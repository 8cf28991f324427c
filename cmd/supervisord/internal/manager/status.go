package manager

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/container"
	"hostkit.dev/cmd/supervisord/internal/fault"
	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// view renders md (and, when given, the holder's live status) as the
// wire Instance.
func (m *Manager) view(md *store.Metadata, live *holder.Status) *api.Instance {
	r := md.Request
	in := &api.Instance{
		AgentUID: uint32(max(md.Spec.AgentUID, 0)), BootID: md.Agent.BootID, Command: r.Command,
		CreatedAt: md.CreatedAt, Exit: md.Exit, ExitedAt: md.ExitedAt, InstanceID: md.ID,
		Isolated: md.Spec.AgentUID >= 0, Labels: r.Labels, Loadout: r.Loadout, Name: r.Name,
		Network: md.Spec.Network, PGID: int64(md.PGID), PID: int64(md.Agent.PID), Profile: r.Profile,
		PTY: r.PTY, Runtime: r.Runtime, Session: md.Session, SessionBackend: md.Spec.SessionBackend,
		StartedAt: md.StartedAt, State: md.State, StopTimeoutMS: r.StopTimeoutMS,
		WatchAgent: md.WatchAgent, WorkingDir: r.WorkingDir,
	}
	if md.Spec.AgentUID < 0 {
		in.AgentUID = uint32(os.Geteuid())
		in.Warning = api.NotIsolatedWarning
	}
	in.Restart, in.Restarts, in.TmuxSocket = r.Restart, int64(md.Restarts), md.Spec.TmuxSocket
	if live != nil && !terminal(md.State) {
		in.State = live.State
		if live.Exit != nil {
			in.Exit = live.Exit
		}
		// After an on-failure restart the agent is another process.
		in.PID, in.PGID, in.Restarts = live.AgentPID, live.PGID, live.Restarts
	}
	in.State = m.liveState(md, in.State)
	// Every warning follows the state shown, not the recorded one: an
	// agent that just ended is reported exited, without its warnings.
	if md.Spec.Network == api.NetworkHost && !terminal(in.State) {
		in.Warning = strings.TrimPrefix(in.Warning+"; "+api.HostNetworkWarning, "; ")
	}
	if md.Egress != nil && md.Egress.Warning != "" && !terminal(in.State) {
		in.Warning = strings.TrimPrefix(in.Warning+"; "+md.Egress.Warning, "; ")
	}
	if md.Egress != nil && md.Egress.Lost != "" && !terminal(in.State) && m.cfg.Egress != nil && m.cfg.Egress.Lost(md.Egress.Epoch) {
		in.Warning = strings.TrimPrefix(in.Warning+"; egress bundle lost with egressd's restart and not registered again: "+md.Egress.Lost, "; ")
	}
	return in
}

// statusLocked answers status with the instance lock held. An instance
// whose operation is still to be finished (an intent left by an earlier
// process, RunRecovery's) is shown as recorded: the finisher reconciles
// it.
func (m *Manager) statusLocked(ctx context.Context, md *store.Metadata) *api.Instance {
	if !pendingIntent(md) {
		m.reconcile(ctx, md)
	}
	return m.status(ctx, md)
}

// pendingIntent reports whether md carries an intent of this version
// (an operation not finished).
func pendingIntent(md *store.Metadata) bool { return md.Intent != nil && md.Intent.Op != "" }

// status merges the holder's live status, without any lock.
func (m *Manager) status(ctx context.Context, md *store.Metadata) *api.Instance {
	if isContainer(md) {
		return m.containerStatus(ctx, md) // container.go
	}
	if terminal(md.State) || md.State == api.StateCreated {
		return m.view(md, nil)
	}
	s, err := m.h.status(ctx, md.ID)
	if err != nil {
		return m.view(md, nil)
	}
	return m.view(md, s)
}

// Status returns one instance's status. It never waits for another
// operation on the instance (a stop in progress reports state stopping).
func (m *Manager) Status(ctx context.Context, id string) (*api.Instance, error) {
	md, err := m.load(id)
	if err != nil {
		return nil, err
	}
	if unlock, ok := m.tryLock(md.ID); ok {
		defer unlock()
		return m.statusLocked(ctx, md), nil
	}
	return m.status(ctx, md), nil
}

// List returns every instance's status, oldest first.
func (m *Manager) List(ctx context.Context) (*api.ListResponse, error) {
	ids, err := m.st.IDs()
	if err != nil {
		return nil, err
	}
	out := &api.ListResponse{Warning: m.Warning(), Instances: []api.Instance{}}
	for _, id := range ids {
		if in, err := m.Status(ctx, id); err == nil {
			out.Instances = append(out.Instances, *in)
		}
	}
	sort.SliceStable(out.Instances, func(i, j int) bool { return out.Instances[i].CreatedAt < out.Instances[j].CreatedAt })
	return out, nil
}

// Stop stops instance id's whole tree and returns its status.
func (m *Manager) Stop(ctx context.Context, id string) (*api.Instance, error) {
	md, unlock, err := m.loadLocked(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if isContainer(md) {
		return m.stopContainer(ctx, md) // container.go
	}
	m.stopLocked(ctx, md)
	return m.view(md, nil), nil
}

// loadLocked takes instance id's lock and reads its metadata under it
// (an operation that finished meanwhile is seen). instance.not_found
// when there is no metadata.
func (m *Manager) loadLocked(id string) (*store.Metadata, func(), error) {
	id, err := api.CanonicalID(id)
	if err != nil {
		return nil, nil, err
	}
	unlock := m.lock(id)
	md, err := m.load(id)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return md, unlock, nil
}

// stopLocked is the stop of a host instance under its lock: the stop
// intent is made durable (when there is anything to stop or release),
// the tree is stopped, the bundle dropped and the leases revoked, then
// the state is saved with the intent cleared. A crash at any step leaves
// the intent, which the next supervisord finishes (RunRecovery).
func (m *Manager) stopLocked(ctx context.Context, md *store.Metadata) {
	m.reconcile(ctx, md)
	registered := md.Egress != nil && md.Egress.Registered
	if terminal(md.State) && !registered && md.Intent == nil {
		return // nothing to stop, nothing to release
	}
	if err := m.beginIntent(store.OpStop, md); err != nil {
		m.cfg.Logger.Error("instance.save", slog.String("instance", md.ID), slog.Any("err", err))
	}
	fault.Point(fault.StopIntent)
	m.stopTree(ctx, md)
	fault.Point(fault.StopStopped)
	m.releaseEgress(ctx, md)
	fault.Point(fault.StopDropped)
	md.Intent = nil
	md.UpdatedAt = time.Now().UnixMilli()
	if err := m.st.Save(md); err != nil {
		m.cfg.Logger.Error("instance.save", slog.String("instance", md.ID), slog.Any("err", err))
	}
}

// stopTree stops md's tree through its holder, waits for the holder to
// end and reconciles; the caller holds the instance lock. A holder whose
// tree has ended may still serve its attached clients their last output
// (holder attachGrace): it is waited for too.
func (m *Manager) stopTree(ctx context.Context, md *store.Metadata) {
	m.reconcile(ctx, md)
	if terminal(md.State) || !m.h.alive(md.ID) {
		m.waitHolderEnd(md.ID)
		m.reconcile(ctx, md)
		return
	}
	md.State = api.StateStopping
	_ = m.st.SaveAtomic(md) // the intent, durable already, says what is under way
	timeout := time.Duration(md.Request.StopTimeoutMS)*time.Millisecond + 20*time.Second
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	err := m.h.stop(cctx, md.ID, md.Request.StopTimeoutMS)
	cancel()
	if err != nil {
		m.cfg.Logger.Warn("instance.stop_call", "instance", md.ID, "err", err)
	}
	m.waitHolderEnd(md.ID)
	m.reconcile(ctx, md)
}

// waitHolderEnd waits (up to 10 s) until instance id's holder has ended.
func (m *Manager) waitHolderEnd(id string) {
	for end := time.Now().Add(10 * time.Second); m.h.alive(id) && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
}

// Destroy stops instance id and removes its directory and run files,
// under the instance lock. A half-made directory (no readable metadata)
// is destroyed too: its holder, if one runs, is stopped, then it is
// removed.
func (m *Manager) Destroy(ctx context.Context, id string) error {
	id, err := api.CanonicalID(id)
	if err != nil {
		return err
	}
	unlock := m.lock(id)
	defer unlock()
	md, err := m.st.Load(id)
	switch {
	case err != nil && !m.dirExists(id):
		return wire.Errorf(api.CodeInstanceNotFound, "no instance %s", id)
	case err != nil:
		return m.destroyBroken(ctx, id, err)
	case isContainer(md):
		return m.destroyContainer(ctx, md) // container.go
	}
	return m.destroyLocked(ctx, md)
}

// destroyLocked is the destroy of a host instance under its lock: the
// destroy intent is made durable, the tree stopped, the egress released,
// then the directory removed through the trash. A crash at any step
// leaves the intent (or the trash), which the next supervisord finishes.
func (m *Manager) destroyLocked(ctx context.Context, md *store.Metadata) error {
	if err := m.beginIntent(store.OpDestroy, md); err != nil {
		return err
	}
	fault.Point(fault.DestroyIntent)
	m.stopTree(ctx, md)
	if m.h.alive(md.ID) {
		return wire.Errorf(wire.CodeInternal, "the holder of %s did not end; not destroyed", md.ID)
	}
	m.releaseEgress(ctx, md)
	fault.Point(fault.DestroyReleased)
	if err := m.removeDir(md.ID); err != nil {
		return err
	}
	m.freeUID(md.ID)
	m.cfg.Logger.Info("instance.destroy", "instance", md.ID)
	return nil
}

// destroyBroken destroys instance directory id whose metadata cannot be
// read (lerr): a holder that still runs there is stopped through its
// socket (default stop timeout), then the directory goes.
func (m *Manager) destroyBroken(ctx context.Context, id string, lerr error) error {
	if rec, err := container.LoadRecord(m.st.Dir(id)); err == nil && !rec.Deleted() && (rec.ContainerID != "" || rec.Pending != nil) {
		// A container instance: its container goes first, or nothing does.
		if m.cfg.Containers == nil {
			return wire.Errorf(api.CodeRuntimeUnavailable, "no containerization-helper is configured (-helper-socket); the container cannot be deleted, the instance stays")
		}
		if _, err := m.cfg.Containers.Stop(ctx, m.st.Dir(id), id, api.DefaultStopTimeoutMS); err != nil && !errors.Is(err, container.ErrProjectChanged) {
			return err
		}
	}
	if m.h.alive(id) {
		err := m.h.stop(context.WithoutCancel(ctx), id, api.DefaultStopTimeoutMS)
		for end := time.Now().Add(10 * time.Second); m.h.alive(id) && time.Now().Before(end); {
			time.Sleep(5 * time.Millisecond)
		}
		if m.h.alive(id) {
			return wire.Wrap(wire.CodeInternal, "the holder of the half-made instance did not end; not destroyed", err)
		}
	}
	if err := m.removeDir(id); err != nil {
		return err
	}
	m.freeUID(id)
	m.cfg.Logger.Warn("instance.destroy", slog.String("instance", id), slog.Bool("half_made", true), slog.String("metadata_err", lerr.Error()))
	m.sweepSoon() // whatever it staged outside, if anything, is the owner sweep's
	return nil
}
