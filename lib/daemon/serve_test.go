package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/audit"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// runService starts svc.Run in a goroutine and waits until it logs
// daemon.ready (its socket listens). stop cancels Run and returns its
// error; done is closed when Run has returned, by itself or after stop, and
// then result gives its error.
func runService(t *testing.T, svc Service) (stop func() error, done <-chan struct{}, result func() error) {
	t.Helper()
	rw := &readyWriter{ready: make(chan struct{})}
	svc.Logger = NewLogger(rw, slog.LevelInfo, nil, svc.Name)
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var runErr error
	go func() { runErr = svc.Run(ctx); close(finished) }()
	result = func() error { <-finished; return runErr }
	select {
	case <-rw.ready:
	case <-finished:
		cancel()
		t.Fatalf("Run returned before listening: %v", runErr)
	case <-time.After(10 * time.Second):
		cancel()
		<-finished
		t.Fatalf("Run did not log daemon.ready")
	}
	stop = func() error {
		cancel()
		select {
		case <-finished:
		case <-time.After(15 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
		return runErr
	}
	t.Cleanup(func() { stop() })
	return stop, finished, result
}

// testService is a Service under a fresh -root layout whose roles hold
// uids; its audit log is open (closed at cleanup).
func testService(t *testing.T, epoch string, uids []uint32, extra func(context.Context) map[string]any) (Service, Layout) {
	t.Helper()
	layout, err := RootLayout(tmpRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	alog, err := OpenAudit(layout, NameSecretd, redact.NewScrubber())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alog.Close() })
	return Service{
		Name:        NameSecretd,
		Socket:      layout.Socket(NameSecretd),
		SocketGroup: -1,
		Logger:      discardLogger(),
		Roles:       rpc.Roles{"admin": uids},
		Ops:         []rpc.Op{Health(epoch, time.Now().Add(-1500*time.Millisecond), extra)},
		AuditLog:    alog,
	}, layout
}

func TestServiceRunHealth(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	epoch, err := NewEpoch()
	is.NoErr(err)
	extra := func(context.Context) map[string]any {
		return map[string]any{"bundles": 3, "status": "spoofed"}
	}
	svc, _ := testService(t, epoch, []uint32{uint32(os.Geteuid())}, extra)
	stop, _, _ := runService(t, svc)

	fi, err := os.Lstat(svc.Socket)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600)) // same-user socket

	c := rpc.NewClient(svc.Socket, 5*time.Second)
	defer c.Close()
	ctx := context.Background()
	h, err := healthapi.Get(ctx, c)
	is.NoErr(err)
	is.Equal(h.Status, "ok")
	is.Equal(h.Version, Version)
	is.Equal(h.Epoch, epoch)
	is.True(h.UptimeMS >= 1500)
	all, err := healthapi.GetAll(ctx, c)
	is.NoErr(err)
	is.Equal(all["status"], "ok") // the common fields win over extra's
	is.True(all["bundles"] != nil)
	var bundles struct {
		Bundles int `msgpack:"bundles"`
	}
	is.NoErr(c.Call(ctx, healthapi.Op, nil, &bundles))
	is.Equal(bundles.Bundles, 3)

	// A body with a field health does not take.
	err = c.Call(ctx, healthapi.Op, map[string]any{"verbose": true}, nil)
	is.Equal(wire.CodeOf(err), wire.CodeRequestUnknownField)

	is.NoErr(stop()) // clean stop returns nil
	_, err = os.Lstat(svc.Socket)
	is.True(errors.Is(err, os.ErrNotExist)) // and removes the socket
}

func TestServiceRunDeniedIsAudited(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	euid := uint32(os.Geteuid())
	svc, layout := testService(t, "0123456789abcdef", []uint32{euid + 4242}, nil)
	stop, _, _ := runService(t, svc)

	c := rpc.NewClient(svc.Socket, 5*time.Second)
	defer c.Close()
	_, err := healthapi.Get(context.Background(), c)
	is.Equal(wire.CodeOf(err), wire.CodePeerDenied)
	is.NoErr(stop())

	recs, err := audit.ReadTail(layout.LogDir(NameSecretd), AuditFile, 10)
	is.NoErr(err)
	is.Equal(len(recs), 1)
	r := recs[0]
	is.Equal(r.Daemon, NameSecretd)
	is.Equal(r.Op, OpHealth)
	is.Equal(r.Outcome, audit.OutcomeDenied)
	is.Equal(r.Code, wire.CodePeerDenied)
	is.Equal(r.Actor.UID, int(euid))
	is.Equal(r.Actor.PID, os.Getpid())
	_, err = audit.Verify(layout.LogDir(NameSecretd), AuditFile)
	is.NoErr(err) // the chain holds
}

func TestServiceRunAuditFuncWins(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	svc, layout := testService(t, "0123456789abcdef", []uint32{uint32(os.Geteuid()) + 4242}, nil)
	events := make(chan rpc.Event, 4)
	svc.Audit = func(_ context.Context, e rpc.Event) { events <- e }
	stop, _, _ := runService(t, svc)
	c := rpc.NewClient(svc.Socket, 5*time.Second)
	defer c.Close()
	_, err := healthapi.Get(context.Background(), c)
	is.Equal(wire.CodeOf(err), wire.CodePeerDenied)
	is.NoErr(stop())
	is.Equal(len(events), 1)
	e := <-events
	is.Equal(e.Outcome, "denied")
	is.Equal(e.Op, OpHealth)
	recs, err := audit.ReadTail(layout.LogDir(NameSecretd), AuditFile, 10)
	is.NoErr(err)
	is.Equal(len(recs), 0) // Audit set: AuditLog is not used
}

func TestServiceRunAlreadyRunning(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	svc, _ := testService(t, "0123456789abcdef", []uint32{uint32(os.Geteuid())}, nil)
	stop, _, _ := runService(t, svc)
	err := svc.Run(context.Background())
	is.Equal(wire.CodeOf(err), sock.CodeAlreadyRunning) // a second daemon refuses to start
	_, serr := os.Lstat(svc.Socket)
	is.NoErr(serr) // and leaves the first one's socket alone
	is.NoErr(stop())
}

// A listener taken early with Listen (before a daemon's start-up work) is
// the one Run serves; while it is held a second Listen is refused, and
// after Run it is closed and the socket gone.
func TestServiceListenEarly(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	svc, _ := testService(t, "0123456789abcdef", []uint32{uint32(os.Geteuid())}, nil)
	svc.Logger = NewLogger(io.Discard, slog.LevelInfo, nil, svc.Name)
	l, err := svc.Listen(context.Background())
	is.NoErr(err)
	_, err = svc.Listen(context.Background())
	is.Equal(wire.CodeOf(err), sock.CodeAlreadyRunning) // a second daemon stops before its start-up work
	svc.Listener = l
	stop, _, _ := runService(t, svc)
	_, err = healthapi.Get(context.Background(), rpc.NewClient(svc.Socket, time.Second))
	is.NoErr(err) // served on the early listener
	is.NoErr(stop())
	_, err = os.Lstat(svc.Socket)
	is.True(os.IsNotExist(err))
}

func TestServiceRunActorError(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	svc, _ := testService(t, "0123456789abcdef", []uint32{uint32(os.Geteuid())}, nil)
	boom := errors.New("sweeper failed")
	release := make(chan struct{})
	svc.Actors = []Actor{{
		Execute:   func() error { <-release; return boom },
		Interrupt: func(error) {},
	}}
	_, done, result := runService(t, svc)
	close(release)
	select {
	case <-done:
		is.Equal(result(), boom) // an actor's error stops the group and is returned
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after its actor failed")
	}
	_, err := os.Lstat(svc.Socket)
	is.True(errors.Is(err, os.ErrNotExist))
}

func TestServiceRunExtraActorInterrupted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	svc, _ := testService(t, "0123456789abcdef", []uint32{uint32(os.Geteuid())}, nil)
	quit := make(chan struct{})
	interrupted := make(chan error, 1)
	svc.Actors = []Actor{{
		Execute:   func() error { <-quit; return nil },
		Interrupt: func(err error) { interrupted <- err; close(quit) },
	}}
	stop, _, _ := runService(t, svc)
	is.NoErr(stop())
	is.Equal(len(interrupted), 1) // the extra actor was told to stop
}
