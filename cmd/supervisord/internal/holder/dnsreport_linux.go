//go:build linux

package holder

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"hostkit.dev/cmd/supervisord/internal/netns"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// Refusal reports (docs/supervisord.md, "Egress"): the holder writes what
// the resolver refused into the instance directory, and supervisord
// audits and removes each report. A file outlives both processes, so a
// refusal made just before the agent ends, or while supervisord is
// down, is still audited.
const (
	// ReportEvery is how often at most the holder writes a report: the
	// audit trail's rate limit per instance.
	ReportEvery = time.Second
	// MaxPendingReports bounds the reports waiting for supervisord; past
	// it the holder keeps counting in memory (bounded by
	// netns.MaxRefusalKeys) and writes once supervisord caught up.
	MaxPendingReports = 60
)

// reportRefusals writes r's counts every ReportEvery until ctx ends, and
// once more when the resolver has stopped (stopped closed). A report that
// cannot be written is logged; its counts are lost.
func (h *holder) reportRefusals(ctx context.Context, r *netns.Refusals, stopped <-chan struct{}) {
	t := time.NewTicker(ReportEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			<-stopped // the resolver answers no more: the last report is complete
			h.writeReport(r)
			return
		case <-t.C:
			h.writeReport(r)
		}
	}
}

// writeReport writes one report of what r counted, if anything, unless
// MaxPendingReports wait already.
func (h *holder) writeReport(r *netns.Refusals) {
	pending, _ := filepath.Glob(filepath.Join(h.cfg.Dir, store.FileDNSRefusedPrefix+"*.json"))
	if len(pending) >= MaxPendingReports {
		return
	}
	rep, ok := r.Take()
	if !ok {
		return
	}
	path := filepath.Join(h.cfg.Dir, fmt.Sprintf("%s%020d.json", store.FileDNSRefusedPrefix, time.Now().UnixNano()))
	if err := store.WriteJSONAtomic(path, rep); err != nil {
		h.log.Error("holder.dns_report", slog.Uint64("refusals", rep.Count), slog.Any("err", err))
	}
}
