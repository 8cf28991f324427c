package audit

import (
	"context"
	"log/slog"

	"hostkit.dev/lib/wire"
)

// Pair links the "before" and "after" records of one mutation. Write the
// before record with Log.Begin before acting, and the after record with
// End once the outcome is known.
type Pair struct {
	l      *Log
	before Record
	// Seq is the before record's seq.
	Seq uint64
}

// Begin writes r as the "before" record of a mutation (Phase "before",
// Outcome "pending", whatever r says) and returns the Pair to End. Errors
// are those of Append; on error the mutation should not proceed.
func (l *Log) Begin(ctx context.Context, r Record) (Pair, error) { return l.begin(ctx, r, true) }

// BeginLazy is Begin without the sync: the before record is in the file
// when it returns (a crash of this process cannot lose it) but becomes
// durable only with the next sync. A caller that uses it must call Sync
// before it acts — typically at the same time as its own state write, so
// the two syncs overlap (on ext4 they share a journal commit) — and end
// the pair before it answers. Errors: those of AppendLazy.
func (l *Log) BeginLazy(ctx context.Context, r Record) (Pair, error) { return l.begin(ctx, r, false) }

// begin is Begin, synced or not.
func (l *Log) begin(ctx context.Context, r Record, sync bool) (Pair, error) {
	r.Phase, r.Outcome = PhaseBefore, OutcomePending
	var seq uint64
	var err error
	if sync {
		seq, err = l.Append(ctx, r)
	} else {
		seq, err = l.AppendLazy(ctx, r)
	}
	if err != nil {
		return Pair{}, err
	}
	return Pair{l: l, before: Record{Actor: r.Actor, Op: r.Op, Corr: r.Corr}, Seq: seq}, nil // End needs no more
}

// End writes the "after" record: the before record's Actor, Op and Corr,
// with outcome (not "pending"), code (the error code, if any) and fields
// plus `before_seq`. It returns the after record's seq. Errors are those of
// Append, and `audit.invalid` for a Pair not made by Begin or a pending
// outcome.
func (p Pair) End(ctx context.Context, outcome Outcome, code string, fields map[string]any) (uint64, error) {
	return p.end(ctx, outcome, code, fields, true)
}

// EndLazy is End without the sync: the after record is written but
// becomes durable only with the next sync (Log.Sync, before the answer
// leaves). Errors: those of End, except `audit.io` from a sync.
func (p Pair) EndLazy(ctx context.Context, outcome Outcome, code string, fields map[string]any) (uint64, error) {
	return p.end(ctx, outcome, code, fields, false)
}

// end is End, synced or not.
func (p Pair) end(ctx context.Context, outcome Outcome, code string, fields map[string]any, sync bool) (uint64, error) {
	if p.l == nil || outcome == OutcomePending {
		return 0, wire.Errorf(CodeInvalid, "End needs a Pair from Begin and a final outcome")
	}
	r := Record{
		Actor:   p.before.Actor,
		Op:      p.before.Op,
		Corr:    p.before.Corr,
		Phase:   PhaseAfter,
		Outcome: outcome,
		Code:    code,
		Fields:  fields,
	}
	// before_seq is added as the record is encoded: fields itself is not
	// modified, nor copied.
	if sync {
		return p.l.appendSync(ctx, r, p.Seq)
	}
	seq, _, err := p.l.append(ctx, r, p.Seq)
	return seq, err
}

// EndWith is End with the after record's fields given as a map and as
// typed values (Record.Attrs, which replace fields of their keys); either
// may be nil.
func (p Pair) EndWith(ctx context.Context, outcome Outcome, code string, fields map[string]any, attrs []slog.Attr) (uint64, error) {
	if p.l == nil || outcome == OutcomePending {
		return 0, wire.Errorf(CodeInvalid, "End needs a Pair from Begin and a final outcome")
	}
	return p.l.appendSync(ctx, Record{
		Actor:   p.before.Actor,
		Op:      p.before.Op,
		Corr:    p.before.Corr,
		Phase:   PhaseAfter,
		Outcome: outcome,
		Code:    code,
		Fields:  fields,
		Attrs:   attrs,
	}, p.Seq)
}
