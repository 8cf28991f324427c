package server

import (
	"context"
	"log/slog"
	"os"
	"time"

	"hostkit.dev/cmd/containerization-helper/internal/provider"
	"hostkit.dev/cmd/containerization-helper/internal/state"
)

// Recover reconciles the helper's records with the runtime at start-up,
// before any op is served (package state, "Recovery": re-observe before
// any retry):
//   - a record still in progress (the previous helper stopped between
//     writing the phase and recording the runtime's answer) gets the
//     phase the runtime shows now, or is removed with the container's
//     bundle and console log when the container is gone;
//   - a settled record whose container is gone (a reboot, a container
//     removed behind the helper's back) is removed the same way;
//   - a bundle directory with a helper-made name and neither record nor
//     container is removed;
//   - rootfs cache entries no bundle runs from and unused for a day, and
//     leftovers of fills that did not finish, are removed;
//   - first of all, what a create killed half-way leaves in the runtime
//     (removeLeftovers) is removed.
//
// Containers themselves are never changed here: an owned container left
// in created is an orphan that observe shows and delete removes by id.
func (s *Server) Recover(ctx context.Context) error {
	if _, err := s.runtime(ctx); err != nil {
		s.log.Warn("helper.recover_skipped", slog.String("code", codeOf(err)))
		return nil // nothing can be reconciled without a runtime; ops will say why
	}
	list, err := s.cfg.Runtime.List(ctx)
	if err != nil {
		return s.mapErr(ctx, err)
	}
	live := map[string]provider.Status{}
	for i := range list {
		live[list[i].ID] = list[i].Status
	}
	s.removeLeftovers(ctx, live)
	for _, r := range s.cfg.Store.Recovering() {
		st, ok := live[r.ID]
		if !ok {
			continue // removed below with the other gone records
		}
		phase := state.PhaseRunning // started at some point: running, paused, or ended
		if st == provider.StatusCreated || st == provider.StatusCreating {
			phase = state.PhaseCreated
		}
		s.log.Info("helper.recover_reconciled", slog.String("container_id", r.ID), slog.String("was", string(r.Phase)), slog.String("now", string(phase)))
		if err := s.cfg.Store.Reconcile(r.ID, phase); err != nil {
			return err
		}
	}
	recs, err := s.cfg.Store.Containers()
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, r := range recs {
		known[r.ID] = true
		if _, ok := live[r.ID]; ok {
			continue
		}
		s.log.Info("helper.recover_gone", slog.String("container_id", r.ID), slog.String("phase", string(r.Phase)))
		s.forget(r.ID, r.Bundle)
	}
	ents, err := os.ReadDir(bundlesDir(s.cfg.StateDir))
	if err != nil {
		return err
	}
	for _, e := range ents {
		id := e.Name()
		if _, ok := live[id]; !validID(id) || known[id] || ok {
			continue
		}
		s.log.Info("helper.recover_stray_bundle", slog.String("container_id", id))
		_ = os.RemoveAll(s.bundlePath(id))
		_ = os.Remove(s.logPath(id))
	}
	if p, ok := s.cfg.Images.(interface {
		Prune(time.Time) ([]string, error)
	}); ok {
		removed, err := p.Prune(s.cfg.Now())
		for _, n := range removed {
			s.log.Info("helper.recover_rootfs_pruned", slog.String("entry", n))
		}
		if err != nil {
			s.log.Warn("helper.recover_rootfs_prune_failed", slog.String("err", err.Error()))
		}
	}
	return nil
}

// leftoverRemover is the provider's RemoveLeftover (package provider).
type leftoverRemover interface {
	RemoveLeftover(ctx context.Context, id, cgroupsPath string) (bool, error)
}

// removeLeftovers removes what a `create` killed half-way (the helper
// SIGKILLed while the runtime ran) leaves in the runtime: a state
// directory under the helper's root with no container the runtime can
// read (no state.json, or one that does not decode), which no verb then
// reaches and which would make every later list and state read fall back
// to running the runtime, and the container's cgroup. It looks only at
// helper-made ids (validID) that the list does not show and that the
// helper was creating: a record in PhaseCreating, or a bundle directory
// of that name (a bundle is made just before create). The provider
// removes them (RemoveLeftover: the runtime's own `delete --force`, else
// by path; the cgroup cgroupParent/<id>, which only the helper names).
// A container the runtime can read, an id the helper did not make, and
// anything outside the helper's own --root are never touched. Failures
// are logged: the rest of recovery goes on.
func (s *Server) removeLeftovers(ctx context.Context, live map[string]provider.Status) {
	rm, ok := s.cfg.Runtime.(leftoverRemover)
	if !ok {
		return
	}
	ids := map[string]bool{}
	for _, r := range s.cfg.Store.Recovering() {
		if r.Phase == state.PhaseCreating {
			ids[r.ID] = true
		}
	}
	if ents, err := os.ReadDir(bundlesDir(s.cfg.StateDir)); err == nil {
		for _, e := range ents {
			ids[e.Name()] = true
		}
	}
	for id := range ids {
		if _, ok := live[id]; ok || !validID(id) {
			continue
		}
		removed, err := rm.RemoveLeftover(ctx, id, cgroupParent+"/"+id)
		switch {
		case err != nil:
			s.log.Warn("helper.recover_leftover_failed", slog.String("container_id", id), slog.String("code", codeOf(err)))
		case removed:
			s.log.Info("helper.recover_leftover_removed", slog.String("container_id", id))
		}
	}
}
