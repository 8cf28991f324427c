package manager

import (
	"context"
	"os"
	"sort"
	"strings"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

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
	if md.Egress != nil && md.Egress.Warning != "" && !terminal(in.State) {
		in.Warning = strings.TrimPrefix(in.Warning+"; "+md.Egress.Warning, "; ")
	}
	return in
}

// statusLocked answers status with the instance lock held.
func (m *Manager) statusLocked(ctx context.Context, md *store.Metadata) *api.Instance {
	m.reconcile(ctx, md)
	return m.status(ctx, md)
}

// status merges the holder's live status, without any lock.
func (m *Manager) status(ctx context.Context, md *store.Metadata) *api.Instance {
	if isContainer(md) {
		return m.containerStatus(ctx, md) // container.go
	}
	if terminal(md.State) || md.State == api.StateCreated {
		return m.view(md, nil)
	}
	s, err := m.holderStatus(ctx, md.ID)
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
	md, err := m.load(id)
	if err != nil {
		return nil, err
	}
	unlock := m.lock(md.ID)
	defer unlock()
	if isContainer(md) {
		return m.stopContainer(ctx, md) // container.go
	}
	m.stopLocked(ctx, md)
	return m.view(md, nil), nil
}

// stopLocked stops md's tree through its holder, waits for the holder to
// end and reconciles; the caller holds the instance lock.
func (m *Manager) stopLocked(ctx context.Context, md *store.Metadata) {
	defer m.releaseEgressSaved(ctx, md)
	m.reconcile(ctx, md)
	if terminal(md.State) || !m.holderAlive(md.ID) {
		m.reconcile(ctx, md)
		return
	}
	md.State = api.StateStopping
	_ = m.st.Save(md)
	timeout := time.Duration(md.Request.StopTimeoutMS)*time.Millisecond + 20*time.Second
	c := m.holderClient(md.ID, timeout)
	var s holder.Status
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	err := c.Call(cctx, holder.OpStop, &holder.StopRequest{TimeoutMS: md.Request.StopTimeoutMS}, &s)
	cancel()
	c.Close()
	if err != nil {
		m.cfg.Logger.Warn("instance.stop_call", "instance", md.ID, "err", err)
	}
	end := time.Now().Add(10 * time.Second)
	for m.holderAlive(md.ID) && time.Now().Before(end) {
		time.Sleep(5 * time.Millisecond)
	}
	m.reconcile(ctx, md)
}

// Destroy stops instance id and removes its directory and run files,
// under the instance lock.
func (m *Manager) Destroy(ctx context.Context, id string) error {
	md, err := m.load(id)
	if err != nil {
		return err
	}
	unlock := m.lock(md.ID)
	defer unlock()
	if isContainer(md) {
		return m.destroyContainer(ctx, md) // container.go
	}
	m.stopLocked(ctx, md)
	if m.holderAlive(md.ID) {
		return wire.Errorf(wire.CodeInternal, "the holder of %s did not end; not destroyed", md.ID)
	}
	os.Remove(m.sockPath(md.ID))
	os.Remove(m.sockPath(md.ID) + ".lock")
	os.Remove(m.tmuxSockPath(md.ID)) // left behind when a tmux server was killed
	if err := os.RemoveAll(m.st.Dir(md.ID)); err != nil {
		return err
	}
	m.freeUID(md.ID)
	m.cfg.Logger.Info("instance.destroy", "instance", md.ID)
	return nil
}
