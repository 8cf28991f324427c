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
//     leftovers of fills that did not finish, are removed.
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
