package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/cmd/containerization-helper/internal/state"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"
)

// auditedServer is a Server with only an audit log, for audited's own
// tests (the mutations themselves are tested with the real helper).
func auditedServer(t *testing.T) (*Server, *audit.Log, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := audit.Open(audit.Options{Dir: dir, Daemon: "helper", Fsync: audit.FsyncAlways})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &Server{cfg: Config{Audit: l}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, l, filepath.Join(dir, "audit.jsonl")
}

// An answer never leaves before its after record is durable: when the
// record cannot be written, the op answers internal (retry after observe)
// instead of its result.
func TestAuditedAnswerWaitsForItsRecord(t *testing.T) {
	is := is.New(t)
	s, l, _ := auditedServer(t)
	h := s.audited(func(context.Context, *rpc.Call) (any, error) {
		l.Close() // the log fails while the op runs
		return "done", nil
	})
	v, err := h(context.Background(), &rpc.Call{Op: "container.start"})
	is.True(v == nil)
	is.Equal(wire.CodeOf(err), wire.CodeInternal)
	is.Equal(wire.AsError(err).Retry, wire.RetryAfterObserve)

	s2, _, _ := auditedServer(t)
	v, err = s2.audited(func(context.Context, *rpc.Call) (any, error) { return "done", nil })(context.Background(), &rpc.Call{Op: "container.start"})
	is.NoErr(err) // the allowed side: a healthy log, the answer as given
	is.Equal(v, "done")
}

// A handler that panics after the op began still closes its pair (with
// internal), and the panic goes on to lib/rpc, which answers internal.
func TestAuditedPanicClosesPair(t *testing.T) {
	is := is.New(t)
	s, _, path := auditedServer(t)
	h := s.audited(func(context.Context, *rpc.Call) (any, error) { panic("boom") })
	func() {
		defer func() { is.Equal(recover(), "boom") }()
		_, _ = h(context.Background(), &rpc.Call{Op: "container.delete"})
	}()
	b, err := os.ReadFile(path)
	is.NoErr(err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	is.Equal(len(lines), 2)
	is.True(strings.Contains(lines[1], `"phase":"after"`))
	is.True(strings.Contains(lines[1], `"code":"internal"`))
}

// The same when the after record is written by durableIdem (the op's
// answer is stored for retries): a record that cannot be written turns
// the answer into internal, though the answer's store write succeeded.
func TestDurableIdemAnswerWaitsForItsRecord(t *testing.T) {
	is := is.New(t)
	s, l, _ := auditedServer(t)
	st, err := state.Open(filepath.Join(t.TempDir(), "store"), state.Options{})
	is.NoErr(err)
	t.Cleanup(func() { st.Close() })
	s.cfg.Store = st
	h := s.audited(s.durableIdem(func(context.Context, *rpc.Call) (any, error) {
		l.Close() // the log fails while the op runs
		return &helperapi.DeleteResponse{ContainerID: "hk-0123456789abcdef", Deleted: true}, nil
	}))
	v, err := h(context.Background(), &rpc.Call{Op: helperapi.OpDelete, Idem: "k1"})
	is.True(v == nil)
	is.Equal(wire.CodeOf(err), wire.CodeInternal)
	is.Equal(wire.AsError(err).Retry, wire.RetryAfterObserve)
}
