package manager

import (
	"context"
	"os"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/egress"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// acquireEgress stages req's credentials and registers the instance's
// bundle, for an instance in network mode (its spec's). Without an egress client (tests of the manager
// alone) an instance without credentials gets no proxy environment and a
// credentialed one fails closed. Errors: credentials.unavailable.
func (m *Manager) acquireEgress(ctx context.Context, req *api.ProvisionRequest, mode string) (*egress.Grant, error) {
	eg := m.cfg.Egress
	if eg == nil {
		if len(req.Credentials) > 0 {
			return nil, wire.Errorf(api.CodeCredentialsUnavailable, "egress: daemon.unavailable: supervisord has no egress configured; nothing was started")
		}
		return &egress.Grant{Env: map[string]string{}}, nil
	}
	creds, allow := egressArgs(req)
	return eg.Acquire(ctx, req.InstanceID, creds, allow, mode == api.NetworkIsolated)
}

// releaseEgress drops md's bundle and revokes its leases (stop, destroy,
// a failed start), and forgets the record; the caller holds the instance
// lock and saves md.
func (m *Manager) releaseEgress(ctx context.Context, md *store.Metadata) {
	if md.Egress == nil || !md.Egress.Registered {
		return
	}
	if m.cfg.Egress != nil && !m.cfg.Egress.Release(ctx, md.ID, md.Egress) {
		m.sweepSoon() // a daemon did not answer: the owner sweep tries again
	}
	md.Egress.Registered = false
}

// liveState is the state status shows: a credentialed instance whose
// bundle belongs to an earlier egressd epoch is credentials_lost while
// its tree lives, until RunReregister registers it again (its record
// then names the new epoch) or it is stopped.
func (m *Manager) liveState(md *store.Metadata, state string) string {
	if (state == api.StateRunning || state == api.StateLeaderExited) && m.credentialsLost(md) {
		return api.StateCredsLost
	}
	return state
}

func (m *Manager) credentialsLost(md *store.Metadata) bool {
	r := md.Egress
	return r != nil && r.Registered && r.Credentialed && m.cfg.Egress != nil && m.cfg.Egress.Lost(r.Epoch)
}

// releaseEgressSaved is releaseEgress followed by a save when there was a
// bundle (stop: after the tree is gone, so the agent cannot use it anymore).
func (m *Manager) releaseEgressSaved(ctx context.Context, md *store.Metadata) {
	if md.Egress == nil || !md.Egress.Registered {
		return
	}
	m.releaseEgress(ctx, md)
	_ = m.st.Save(md)
}

// checkEgress fails a credentialed provision that does not start now when
// egressd or secretd cannot be reached (fail closed early); the leases
// are staged when the instance starts. Errors: credentials.unavailable.
func (m *Manager) checkEgress(ctx context.Context, req *api.ProvisionRequest) error {
	if len(req.Credentials) == 0 {
		return nil
	}
	if m.cfg.Egress == nil {
		return wire.Errorf(api.CodeCredentialsUnavailable, "egress: daemon.unavailable: supervisord has no egress configured")
	}
	return m.cfg.Egress.Check(ctx)
}

// sweepEvery is how often RunEgressSweep looks for host instances that
// ended on their own.
const sweepEvery = time.Second

// RunEgressSweep drops, until ctx ends, the bundle of every host instance
// whose tree ended on its own (the holder wrote exit.json, or it is gone),
// and runs again what recovery could not finish at start (the owner sweep
// when a daemon did not answer, container provisions the helper could not
// settle):
// without it the bundle, and its credentials' substitution at egressd,
// would live on until someone asked for the instance's status, stopped
// or destroyed it. It looks every second; a live instance costs one file
// check. Container instances keep theirs until their end is observed
// (status, stop): seeing it costs a helper call.
func (m *Manager) RunEgressSweep(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.sweepEgress(ctx)
			m.retryUnresolved(ctx)
			if m.rec.due.Load() {
				m.sweepOwned(ctx)
			}
		}
	}
}

// sweepEgress is one pass of RunEgressSweep.
func (m *Manager) sweepEgress(ctx context.Context) {
	ids, _ := m.st.IDs()
	for _, id := range ids {
		md, err := m.st.Load(id)
		if err != nil || md.Egress == nil || !md.Egress.Registered || md.State == api.StateCreated || pendingIntent(md) {
			continue // pendingIntent: the operation under way (or its finisher) releases it
		}
		if !terminal(md.State) && (isContainer(md) || (!exists(m.st.Path(id, store.FileExit)) && m.h.alive(id))) {
			continue // running, as far as a file check tells
		}
		func() {
			unlock := m.lock(id)
			defer unlock()
			if md, err = m.st.Load(id); err != nil || md.Egress == nil || !md.Egress.Registered || pendingIntent(md) {
				return
			}
			m.reconcile(ctx, md)
			if terminal(md.State) {
				m.releaseEgressSaved(ctx, md) // logs instance.egress_released
			}
		}()
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
