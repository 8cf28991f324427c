package server

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"hostkit.dev/lib/sock"
)

// Outcomes of an audited op.
const (
	OutcomeOK      = "ok"
	OutcomeRefused = "refused" // a typed refusal (lease.*, credential.*, request.*)
	OutcomeError   = "error"   // internal failure
)

// Event is one audit record as the server produces it. Fields carry
// names, counts and handle fingerprints, never a value or a handle.
type Event struct {
	Op      string         // the op, or OpReuseAttempt, OpBogusHandles
	Peer    sock.Peer      // the caller's kernel credentials
	Outcome string         // OutcomeOK, OutcomeRefused or OutcomeError
	Code    string         // the error code; "" on success
	Corr    string         // the request's correlation id; "" = none
	Fields  map[string]any // op-specific: names, counts, fingerprints
}

// KeyCred is the log and audit field naming a credential. It is not
// "credential": the redacting log handler treats keys containing that word
// as secret and would hide the name.
const KeyCred = "cred"

// Auditor writes one audit record. It must be safe for concurrent use.
type Auditor func(ctx context.Context, ev Event)

// OpBogusHandles is the audit op of an aggregated flood summary.
const OpBogusHandles = "lease.bogus_handles"

// flood aggregates refusals caused by bogus handles (unknown, invalid,
// stale, or a consumed one presented again after its first reuse): per
// peer UID at most one individual record per window; the rest are counted
// and written as one OpBogusHandles summary when the window ends.
type flood struct {
	mu     sync.Mutex
	window time.Duration
	now    func() time.Time
	per    map[uint32]*floodState
}

type floodState struct {
	start time.Time
	peer  sock.Peer
	count int
	codes map[string]int
}

func newFlood(window time.Duration, now func() time.Time) *flood {
	return &flood{window: window, now: now, per: map[uint32]*floodState{}}
}

// admit reports whether a bogus-handle refusal by p should be written now;
// if a finished window's summary is due first, it is returned too.
func (f *flood) admit(p sock.Peer, code string) (write bool, due *Event) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.per[p.UID]
	if st != nil && now.Sub(st.start) < f.window {
		st.count++
		st.codes[code]++
		return false, nil
	}
	if st != nil && st.count > 0 {
		due = st.summary(now)
	}
	f.per[p.UID] = &floodState{start: now, peer: p, codes: map[string]int{}}
	return true, due
}

// flush returns the summaries of windows that have ended (all of them
// when force), and forgets those peers.
func (f *flood) flush(force bool) []Event {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Event
	uids := make([]uint32, 0, len(f.per))
	for uid := range f.per {
		uids = append(uids, uid)
	}
	sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
	for _, uid := range uids {
		st := f.per[uid]
		if !force && now.Sub(st.start) < f.window {
			continue
		}
		if st.count > 0 {
			out = append(out, *st.summary(now))
		}
		delete(f.per, uid)
	}
	return out
}

func (st *floodState) summary(now time.Time) *Event {
	codes := make(map[string]any, len(st.codes))
	for c, n := range st.codes {
		codes[c] = n
	}
	return &Event{Op: OpBogusHandles, Peer: st.peer, Outcome: OutcomeRefused, Fields: map[string]any{
		"suppressed": st.count, "codes": codes, "window_start_ms": st.start.UnixMilli(), "window_end_ms": now.UnixMilli(),
	}}
}

// record audits ev and logs its canonical line (one per decision).
func (s *Server) record(ctx context.Context, ev Event) {
	if s.audit != nil {
		s.audit(ctx, ev)
	}
	level := slog.LevelInfo
	if ev.Outcome == OutcomeError {
		level = slog.LevelError
	} else if ev.Outcome != OutcomeOK {
		level = slog.LevelWarn
	}
	if !s.log.Enabled(ctx, level) {
		return // the line would be dropped: build none of it
	}
	attrs := make([]slog.Attr, 0, 5+len(ev.Fields))
	attrs = append(attrs, slog.String("outcome", ev.Outcome), slog.Uint64("peer_uid", uint64(ev.Peer.UID)), slog.Int64("peer_pid", int64(ev.Peer.PID)))
	if ev.Code != "" {
		attrs = append(attrs, slog.String("code", ev.Code))
	}
	if ev.Corr != "" {
		attrs = append(attrs, slog.String("corr", ev.Corr))
	}
	keys := make([]string, 0, len(ev.Fields))
	for k := range ev.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, ev.Fields[k]))
	}
	s.log.LogAttrs(ctx, level, ev.Op, attrs...)
}

// FlushFloods writes the summaries of finished flood windows (all when
// force, at shutdown).
func (s *Server) FlushFloods(ctx context.Context, force bool) {
	for _, ev := range s.flood.flush(force) {
		s.record(ctx, ev)
	}
}
