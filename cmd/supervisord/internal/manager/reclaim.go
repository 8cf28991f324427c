package manager

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sort"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// The owner sweep (docs/supervisord.md, "Egress"): secretd and egressd
// are asked what they hold under supervisord's owner id, and whatever no
// instance of this supervisord claims is released, by owner, so that
// another supervisord's leases and bundles are never touched. It runs at
// start (Reconcile) and again, from the egress sweep, whenever a release
// could not reach a daemon.

// sweepSoon makes the egress sweep run the owner sweep at its next tick.
func (m *Manager) sweepSoon() { m.rec.due.Store(true) }

// sweepOwned is one owner sweep. It stays due while a daemon does not
// answer.
func (m *Manager) sweepOwned(ctx context.Context) {
	eg := m.cfg.Egress
	if eg == nil || eg.Owner() == "" {
		m.rec.due.Store(false)
		return
	}
	m.rec.due.Store(false)
	l, err := eg.Leftovers(ctx)
	if err != nil {
		m.rec.due.Store(true)
		m.cfg.Logger.Warn("egress.sweep_incomplete", slog.String("code", wire.CodeOf(err)))
	}
	invs := l.Invocations()
	sort.Strings(invs)
	for _, inv := range invs {
		_, bundle := l.Bundles[inv]
		m.releaseUnclaimed(ctx, inv, l.Leases[inv], bundle)
	}
}

// releaseUnclaimed releases invocation inv's leases (n of them) and
// bundle, as far as no instance claims them. It holds inv's instance lock
// while it decides, so no operation on that instance is under way: an
// unconsumed lease then belongs to nobody (only a provision in progress
// needs one), and a bundle belongs to its instance only while that
// instance lives and its record says registered. A registered record of
// an instance that ended is released through the record, as a stop
// would.
func (m *Manager) releaseUnclaimed(ctx context.Context, inv string, n int, bundle bool) {
	if id, err := api.CanonicalID(inv); err == nil && id == inv {
		unlock := m.lock(id)
		defer unlock()
		md, err := m.st.Load(id)
		switch {
		case err == nil && md.Egress != nil && md.Egress.Registered && !terminal(md.State):
			bundle = false // the live instance's own bundle
		case err == nil && md.Egress != nil && md.Egress.Registered:
			m.releaseEgressSaved(ctx, md) // its own pending release (also revokes)
			return
		case err != nil && !errors.Is(err, os.ErrNotExist) && m.dirExists(id):
			// A directory supervisord cannot read (another schema
			// version): its bundle may be in use; leases are nobody's.
			bundle = false
		}
	}
	if n == 0 && !bundle {
		return
	}
	revoked, dropped, err := m.cfg.Egress.ReleaseLeftover(ctx, inv, n > 0, bundle)
	if err != nil {
		m.sweepSoon()
	}
	m.audit(ctx, AuditEgressReclaim, err, map[string]any{"invocation": inv, "owner": m.cfg.Egress.Owner(),
		"leases_listed": n, "leases_revoked": revoked, "bundle_listed": bundle, "bundle_dropped": dropped})
	m.cfg.Logger.Warn("egress.reclaimed", slog.String("instance", inv), slog.Int("leases_revoked", revoked),
		slog.Bool("bundle_dropped", dropped), slog.String("code", wire.CodeOf(err)))
}
