package manager

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/egress"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// AuditReregister: a running instance's bundle was registered again at
// egressd (after egressd forgot it), or that failed and the instance is
// credentials_lost; fields say which.
const AuditReregister = "instance.reregister"

// Re-registration's pacing.
const (
	// reregisterWorkers bounds the instances re-registered at once: each
	// costs a few calls to secretd and egressd, which serve them
	// concurrently.
	reregisterWorkers = 16
	// reregisterTick is how often RunReregister looks for failed
	// re-registrations due for another attempt.
	reregisterTick = 250 * time.Millisecond
	// Backoff of a transient failure: first retry after reregisterRetryMin,
	// doubling up to reregisterRetryMax.
	reregisterRetryMin = 500 * time.Millisecond
	reregisterRetryMax = 30 * time.Second
)

// reregState is RunReregister's state: a kick per new egressd epoch, and
// the instances whose re-registration failed transiently, with when to
// try again.
type reregState struct {
	kick  chan struct{} // capacity 1: a new epoch was seen
	mu    sync.Mutex
	retry map[string]retryAt
}

type retryAt struct {
	at      time.Time
	backoff time.Duration
}

// OnEgressEpoch is called with egressd's epoch whenever the watcher sees a
// new one (a restart: egressd forgot every bundle): it wakes
// RunReregister, which registers every live instance's bundle again.
func (m *Manager) OnEgressEpoch(epoch string) {
	select {
	case m.rr.kick <- struct{}{}:
	default: // a pass is already due
	}
}

// RunReregister gives running agents their bundles back after egressd
// forgot them, until ctx ends (docs/supervisord.md, "Egress"): on every
// new egressd epoch it re-registers each live host instance whose bundle
// belongs to another epoch, reusing the proxy token and placeholders its
// agent.env holds, so the agent keeps working without a restart; a
// transient failure (a daemon did not answer) is tried again with
// backoff, any other waits for the next epoch. Each attempt is audited.
func (m *Manager) RunReregister(ctx context.Context) {
	t := time.NewTicker(reregisterTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.rr.kick:
			m.rr.mu.Lock()
			clear(m.rr.retry) // a new epoch: every instance gets a fresh attempt
			m.rr.mu.Unlock()
			m.reregisterAll(ctx, false)
		case <-t.C:
			m.reregisterAll(ctx, true)
		}
	}
}

// reregisterAll re-registers every instance that needs it: all of them,
// or with retriesOnly those whose transient failure is due for another
// attempt.
func (m *Manager) reregisterAll(ctx context.Context, retriesOnly bool) {
	if m.cfg.Egress == nil {
		return
	}
	now := time.Now()
	var due []string
	if retriesOnly {
		m.rr.mu.Lock()
		for id, r := range m.rr.retry {
			if !now.Before(r.at) {
				due = append(due, id)
			}
		}
		m.rr.mu.Unlock()
		if len(due) == 0 {
			return
		}
	} else {
		due, _ = m.st.IDs()
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(reregisterWorkers, len(due)) {
		wg.Go(func() {
			for id := range work {
				m.reregisterOne(ctx, id)
			}
		})
	}
	for _, id := range due {
		if ctx.Err() != nil {
			break
		}
		if md, err := m.st.Load(id); err == nil && m.needsReregister(md) {
			work <- id
		} else if retriesOnly {
			m.forgetRetry(id)
		}
	}
	close(work)
	wg.Wait()
}

// needsReregister reports whether md is a live host instance whose
// bundle belongs to an egressd epoch that is gone, with no operation
// under way on it.
func (m *Manager) needsReregister(md *store.Metadata) bool {
	r := md.Egress
	if r == nil || !r.Registered || isContainer(md) || pendingIntent(md) || terminal(md.State) || md.State == api.StateCreated {
		return false
	}
	return m.cfg.Egress.Lost(r.Epoch) && !exists(m.st.Path(md.ID, store.FileExit)) && m.h.alive(md.ID)
}

func (m *Manager) forgetRetry(id string) {
	m.rr.mu.Lock()
	delete(m.rr.retry, id)
	m.rr.mu.Unlock()
}

// reregisterOne re-registers instance id under its lock (so no stop,
// destroy or second attempt runs meanwhile), records the outcome in its
// metadata (the new epoch, or why it failed), audits it and logs it.
func (m *Manager) reregisterOne(ctx context.Context, id string) {
	unlock := m.lock(id)
	defer unlock()
	md, err := m.st.Load(id)
	if err != nil || !m.needsReregister(md) {
		m.forgetRetry(id)
		return
	}
	prev := md.Egress.Epoch
	creds, allow := egressArgs(&md.Request)
	var epoch string
	env, err := os.ReadFile(m.st.Path(id, store.FileAgentEnv))
	if err == nil {
		var held egress.Held
		if held, err = egress.ParseHeld(env, id, creds); err == nil {
			epoch, err = m.cfg.Egress.Reregister(ctx, id, creds, allow, held)
		} else {
			err = wire.Wrap(api.CodeCredentialsUnavailable, "agent.env: "+wire.AsError(err).Msg, err)
		}
		clear(env)
	} else {
		err = wire.Wrap(api.CodeCredentialsUnavailable, "agent.env: cannot be read", err)
	}
	fields := map[string]any{"instance": id, "owner": m.cfg.Egress.Owner(), "previous_epoch": prev, "credentials": len(creds)}
	if err != nil {
		reason := wire.AsError(err).Msg
		fields["reason"] = reason
		md.Egress.Lost = reason
		transient := egress.Transient(err)
		fields["retry"] = transient
		m.audit(ctx, AuditReregister, err, fields)
		m.cfg.Logger.Warn("instance.credentials_lost", slog.String("instance", id), slog.String("bundle_epoch", prev),
			slog.String("reason", reason), slog.Bool("retry", transient))
		m.rr.mu.Lock()
		if transient {
			r := m.rr.retry[id]
			r.backoff = min(max(2*r.backoff, reregisterRetryMin), reregisterRetryMax)
			r.at = time.Now().Add(r.backoff)
			if m.rr.retry == nil {
				m.rr.retry = map[string]retryAt{}
			}
			m.rr.retry[id] = r
		} else {
			delete(m.rr.retry, id)
		}
		m.rr.mu.Unlock()
	} else {
		md.Egress.Epoch, md.Egress.Lost = epoch, ""
		fields["epoch"] = epoch
		m.audit(ctx, AuditReregister, nil, fields)
		m.forgetRetry(id)
	}
	// Not fsynced: the epoch dies with the host anyway (egressd's bundles
	// live in its memory), and a durable write per instance would slow
	// the re-registration of many by a journal commit each.
	if serr := m.st.SaveAtomic(md); serr != nil {
		m.cfg.Logger.Error("instance.save", slog.String("instance", id), slog.Any("err", serr))
	}
}

// egressArgs is what an instance's bundle is made of: the request's
// credentials and its allowed origins.
func egressArgs(req *api.ProvisionRequest) ([]api.CredentialSpec, []string) {
	var allow []string
	if req.Network != nil {
		allow = req.Network.Allow
	}
	return req.Credentials, allow
}
