package server

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"hostkit.dev/cmd/secretd/internal/credential"
	"hostkit.dev/cmd/secretd/internal/lease"
	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/cmd/secretd/internal/store"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
)

var (
	self   = uint32(os.Geteuid())
	canary = []byte("CANARY-server-9d1e4b77")
)

// harness is a Server on a real socket with captured logs and audit events.
type harness struct {
	srv    *Server
	alloc  *secmem.Allocator
	raw    *rpc.Client
	api    *secretdapi.Client
	logs   *lockedBuf
	mu     sync.Mutex
	events []Event
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// allRoles gives the test process every role.
func allRoles() rpc.Roles {
	return rpc.Roles{secretdapi.RoleAdmin: {self}, secretdapi.RoleStager: {self}, secretdapi.RoleConsumer: {self}}
}

func start(t testing.TB, roles rpc.Roles) *harness {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "hk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	h := &harness{logs: &lockedBuf{}}
	log := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.alloc = secmem.New(log)
	st, err := store.Open(filepath.Join(dir, "state", "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	reg := credential.NewRegistry(st, h.alloc, nil)
	table, err := lease.New(lease.Config{Epoch: [8]byte{7, 7, 7, 7, 7, 7, 7, 7}, Alloc: h.alloc, MaxLeases: 1000})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = New(Config{Registry: reg, Leases: table, Alloc: h.alloc, Logger: log, Audit: func(_ context.Context, ev Event) {
		h.mu.Lock()
		h.events = append(h.events, ev)
		h.mu.Unlock()
	}})
	path := filepath.Join(dir, "run", "api.sock")
	l, err := sock.Listen(context.Background(), sock.Config{Path: path, Group: -1})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rpc.NewServer(rpc.Config{Daemon: "secretd", Roles: roles, Logger: log}, h.srv.Ops()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rs.Serve(ctx, l) }()
	h.raw = rpc.NewClient(path, 5*time.Second)
	h.api = secretdapi.NewClient(h.raw)
	t.Cleanup(func() {
		h.raw.Close()
		cancel()
		<-done
		table.Close()
		reg.Close()
	})
	return h
}

func (h *harness) auditLog() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Event(nil), h.events...)
}

// put stores a credential with the canary value.
func (h *harness) put(t testing.TB, name string, dests []string, targets ...secretdapi.TargetSpec) {
	t.Helper()
	if len(targets) == 0 {
		targets = []secretdapi.TargetSpec{{Target: "header:Authorization", Template: "Bearer {}"}}
	}
	_, err := h.api.CredentialPut(context.Background(), &secretdapi.CredentialPutRequest{
		Name: name, Value: bytes.Clone(canary), Destinations: dests, Targets: targets}, "")
	if err != nil {
		t.Fatal(err)
	}
}
