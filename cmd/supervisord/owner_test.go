//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/egress"
)

const foreignOwner = "sv-foreign-0123"

// stageAs stages credential "api" for invocation under owner.
func (s *crashStack) stageAs(t *testing.T, owner, invocation string) []byte {
	t.Helper()
	st, err := s.sdc.LeaseStage(context.Background(), &secretdapi.LeaseStageRequest{Credential: "api", Invocation: invocation, Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	return st.Handle
}

// registerAs registers a bundle for invocation under owner (with the
// given handles) and returns its proxy token.
func (s *crashStack) registerAs(t *testing.T, owner, invocation string, handles ...[]byte) {
	t.Helper()
	tok, _ := egress.NewProxyToken()
	if _, err := s.egc.BundleRegister(context.Background(), &egressdapi.BundleRegisterRequest{Invocation: invocation, Owner: owner,
		ProxyToken: tok, Handles: handles}); err != nil {
		t.Fatal(err)
	}
}

// foreignWorks checks that the foreign bundle of invocation still holds
// its credential and injects it.
func (s *crashStack) foreignWorks(t *testing.T, invocation string) {
	t.Helper()
	is := is.New(t)
	bl, err := s.egc.BundleList(context.Background(), foreignOwner, invocation)
	is.NoErr(err)
	is.Equal(len(bl.Bundles), 1)
	is.True(bl.Bundles[0].Credentialed)
	before := len(s.received())
	r, err := s.egc.Request(context.Background(), &egressdapi.RequestRequest{Invocation: invocation, Method: "GET", URL: s.origin + "/"})
	is.NoErr(err)
	is.Equal(r.Status, 200)
	got := s.received()
	is.Equal(len(got), before+1)
	is.Equal(got[len(got)-1], "Bearer "+egressCanary) // the other owner's credential still works
}

// TestReconcileReleasesOnlyItsOwn: after a restart, supervisord releases
// the leases and bundles that carry its own owner id and that no instance
// of its claims, and audits each release; a live instance keeps its
// bundle; another owner's leases and bundles, also of the same
// invocation, are untouched and keep working.
func TestReconcileReleasesOnlyItsOwn(t *testing.T) {
	is := is.New(t)
	s := newCrashStack(t)
	ctx := context.Background()
	live, err := s.c.Provision(ctx, credReq())
	is.NoErr(err)
	s.kill()
	orphanLease, orphanBundle, foreign, shared := api.NewID(), api.NewID(), api.NewID(), api.NewID()
	s.stageAs(t, s.owner, orphanLease)
	s.stageAs(t, s.owner, shared)
	s.stageAs(t, foreignOwner, shared) // the same invocation, another owner
	s.registerAs(t, s.owner, orphanBundle, s.stageAs(t, s.owner, orphanBundle))
	s.registerAs(t, foreignOwner, foreign, s.stageAs(t, foreignOwner, foreign))
	s.stageAs(t, foreignOwner, foreign)
	s.boot()

	mine, err := s.sdc.LeaseListOwned(ctx, s.owner, "")
	is.NoErr(err)
	is.Equal(len(mine.Leases), 0) // allowed: every unclaimed lease of ours is revoked
	theirs, err := s.sdc.LeaseListOwned(ctx, foreignOwner, "")
	is.NoErr(err)
	is.Equal(len(theirs.Leases), 2) // refused: the other owner's, of the shared invocation too
	bl, err := s.egc.BundleList(ctx, s.owner, "")
	is.NoErr(err)
	is.Equal(len(bl.Bundles), 1)
	is.Equal(bl.Bundles[0].Invocation, live.InstanceID) // the live instance keeps its bundle
	s.foreignWorks(t, foreign)
	st, err := s.c.Status(ctx, live.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateRunning)

	b, err := os.ReadFile(filepath.Join(s.root, "log", "supervisord", "audit.jsonl"))
	is.NoErr(err)
	audit := string(b)
	for _, inv := range []string{orphanLease, orphanBundle, shared} {
		is.True(strings.Contains(audit, `"invocation":"`+inv+`"`)) // each release audited
	}
	is.True(strings.Contains(audit, `"op":"egress.reclaim"`))
	is.True(!strings.Contains(audit, `"invocation":"`+foreign+`"`)) // nothing of the other owner's released
	is.True(!bytes.Contains(b, []byte(egressCanary)))
	is.NoErr(s.c.Destroy(ctx, live.InstanceID))
}

// TestBundleExistsNeverDropsAnothers: a provision whose id meets another
// owner's bundle fails with credentials.unavailable (bundle.exists in
// the message), leaves nothing of its own (no lease, no directory) and
// never drops that bundle, which keeps working; a bundle of supervisord's
// own owner id left for the id (a crash nothing released yet) is
// replaced and the provision succeeds.
func TestBundleExistsNeverDropsAnothers(t *testing.T) {
	is := is.New(t)
	s := newCrashStack(t)
	ctx := context.Background()
	req := credReq()
	s.registerAs(t, foreignOwner, req.InstanceID, s.stageAs(t, foreignOwner, req.InstanceID))
	_, err := s.c.Provision(ctx, req)
	is.Equal(wire.CodeOf(err), api.CodeCredentialsUnavailable)
	is.True(strings.Contains(err.Error(), egressdapi.CodeBundleExists))
	_, err = s.c.Status(ctx, req.InstanceID)
	is.Equal(wire.CodeOf(err), api.CodeInstanceNotFound)
	mine, err := s.sdc.LeaseListOwned(ctx, s.owner, "")
	is.NoErr(err)
	is.Equal(len(mine.Leases), 0) // its staged leases were revoked
	s.foreignWorks(t, req.InstanceID)

	own := credReq()
	s.registerAs(t, s.owner, own.InstanceID) // a leftover of ours, without credentials
	in, err := s.c.Provision(ctx, own)
	is.NoErr(err)
	is.Equal(in.State, api.StateRunning)
	bl, err := s.egc.BundleList(ctx, s.owner, own.InstanceID)
	is.NoErr(err)
	is.Equal(len(bl.Bundles), 1)
	is.True(bl.Bundles[0].Credentialed) // the new registration, not the leftover
	is.True(strings.Contains(s.cmd.Stderr.(*lockedBuf).String(), "instance.bundle_replaced"))
	is.NoErr(s.c.Destroy(ctx, own.InstanceID))
	bl, err = s.egc.BundleList(ctx, s.owner, "")
	is.NoErr(err)
	is.Equal(len(bl.Bundles), 0)
	s.foreignWorks(t, req.InstanceID)
}

// TestHalfMadeDirectories: every directory under the instance root is an
// instance or is reclaimed. At start a directory without metadata, one
// whose metadata is not JSON and the trash are removed (audited) and
// their ids provision again; a name supervisord never makes and metadata
// of another schema version are left alone. While running, destroy works
// on a half-made directory.
func TestHalfMadeDirectories(t *testing.T) {
	is := is.New(t)
	e := start(t, "-host-runtime-enabled", "yes")
	ctx := context.Background()
	root := filepath.Join(e.root, "state", "supervisord", "instances")
	e.kill()
	empty, torn, newer := api.NewID(), api.NewID(), api.NewID()
	is.NoErr(os.Mkdir(filepath.Join(root, empty), 0o700))
	is.NoErr(os.Mkdir(filepath.Join(root, torn), 0o700))
	is.NoErr(os.WriteFile(filepath.Join(root, torn, "metadata.json"), []byte(`{"schema_ver`), 0o600))
	is.NoErr(os.Mkdir(filepath.Join(root, newer), 0o700))
	is.NoErr(os.WriteFile(filepath.Join(root, newer, "metadata.json"), []byte(`{"schema_version": 99}`), 0o600))
	trash := filepath.Join(root, ".trash-"+api.NewID()+"-0a0b")
	is.NoErr(os.MkdirAll(filepath.Join(trash, "x"), 0o700))
	is.NoErr(os.Mkdir(filepath.Join(root, "lost+found"), 0o700))
	e.boot()
	for _, p := range []string{empty, torn, trash} {
		_, err := os.Stat(filepath.Join(root, filepath.Base(p)))
		is.True(os.IsNotExist(err)) // reclaimed
	}
	for _, p := range []string{newer, "lost+found"} {
		_, err := os.Stat(filepath.Join(root, p))
		is.NoErr(err) // left alone
	}
	for _, id := range []string{empty, torn} {
		in, err := e.c.Provision(ctx, &api.ProvisionRequest{InstanceID: id, Command: []string{"sleep", "100"}, Start: true, WorkingDir: "/tmp", StopTimeoutMS: 1000})
		is.NoErr(err) // the id is free again
		is.Equal(in.State, api.StateRunning)
		is.NoErr(e.c.Destroy(ctx, id))
	}
	b, err := os.ReadFile(filepath.Join(e.root, "log", "supervisord", "audit.jsonl"))
	is.NoErr(err)
	is.Equal(strings.Count(string(b), `"reason":"no_metadata"`), 2)
	is.Equal(strings.Count(string(b), `"reason":"trash"`), 1)

	// Destroy works on a half-made directory, also the one of another
	// schema version; once gone, the id is not found and provisions.
	half := api.NewID()
	is.NoErr(os.Mkdir(filepath.Join(root, half), 0o700))
	_, err = e.c.Status(ctx, half)
	is.Equal(wire.CodeOf(err), api.CodeInstanceNotFound)
	_, err = e.c.Provision(ctx, &api.ProvisionRequest{InstanceID: half, Command: []string{"true"}, WorkingDir: "/tmp"})
	is.Equal(wire.CodeOf(err), api.CodeInstanceExists)
	for _, id := range []string{half, newer} {
		is.NoErr(e.c.Destroy(ctx, id))
		_, err := os.Stat(filepath.Join(root, id))
		is.True(os.IsNotExist(err))
		is.Equal(wire.CodeOf(e.c.Destroy(ctx, id)), api.CodeInstanceNotFound)
	}
	_, err = e.c.Provision(ctx, &api.ProvisionRequest{InstanceID: half, Command: []string{"true"}, WorkingDir: "/tmp"})
	is.NoErr(err)
	is.NoErr(e.c.Destroy(ctx, half))
}
