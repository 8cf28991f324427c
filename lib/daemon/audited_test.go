package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

func TestAuditOpsWritesPairsAndSingles(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	l, err := audit.Open(audit.Options{Dir: dir, Daemon: "t"})
	is.NoErr(err)
	defer l.Close()
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ran := 0
	ops := AuditOps(l, log, map[string]bool{"thing.make": true},
		func(c *rpc.Call) map[string]any { return map[string]any{"instance_id": "abc"} },
		rpc.Op{Name: "thing.make", Handler: func(context.Context, *rpc.Call) (any, error) { ran++; return nil, nil }},
		rpc.Op{Name: "thing.get", Handler: func(context.Context, *rpc.Call) (any, error) {
			return nil, wire.Errorf("thing.not_found", "no such thing")
		}},
	)
	call := func(op string) *rpc.Call { return &rpc.Call{Op: op, Corr: "c-9", Peer: sock.Peer{UID: 7, PID: 42}} }
	_, err = ops[0].Handler(context.Background(), call("thing.make"))
	is.NoErr(err)
	_, err = ops[1].Handler(context.Background(), call("thing.get"))
	is.True(wire.HasCode(err, "thing.not_found"))
	is.Equal(ran, 1)

	recs, err := audit.ReadTail(dir, "audit.jsonl", 10)
	is.NoErr(err)
	is.Equal(len(recs), 3)
	is.Equal(recs[0].Phase, audit.PhaseBefore) // written before the change
	is.Equal(recs[1].Phase, audit.PhaseAfter)
	is.Equal(recs[1].Outcome, audit.OutcomeOK)
	is.Equal(recs[2].Outcome, audit.OutcomeError)
	is.Equal(recs[2].Code, "thing.not_found")
	for _, r := range recs {
		is.Equal(r.Actor.UID, 7)
		is.Equal(r.Corr, "c-9")
		is.Equal(r.Fields["instance_id"], "abc")
	}
}

// A mutation whose before record cannot be written does not run.
func TestAuditOpsRefusesWhenAuditFails(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, err := audit.Open(audit.Options{Dir: t.TempDir(), Daemon: "t"})
	is.NoErr(err)
	is.NoErr(l.Close()) // appends now fail
	ran := false
	ops := AuditOps(l, slog.New(slog.NewJSONHandler(io.Discard, nil)), map[string]bool{"thing.make": true}, nil,
		rpc.Op{Name: "thing.make", Handler: func(context.Context, *rpc.Call) (any, error) { ran = true; return nil, nil }})
	_, err = ops[0].Handler(context.Background(), &rpc.Call{Op: "thing.make"})
	is.True(err != nil)
	is.Equal(wire.CodeOf(err), wire.CodeInternal)
	is.True(!ran)
	var we *wire.Error
	is.True(errors.As(err, &we))
}
