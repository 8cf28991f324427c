//go:build linux

package manager

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/audit"

	"hostkit.dev/cmd/supervisord/internal/egress"
	"hostkit.dev/cmd/supervisord/internal/proc"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// crashAfterIntent lays down what a provision of r leaves when
// supervisord dies right after its first write, the provision intent:
// the directory and metadata.json, made by the manager's own steps.
func (x *harness) crashAfterIntent(t *testing.T, r *api.ProvisionRequest) *store.Metadata {
	t.Helper()
	m := x.m
	if err := m.normalize(r); err != nil {
		t.Fatal(err)
	}
	dg, err := digest(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.st.Create(r.InstanceID); err != nil {
		t.Fatal(err)
	}
	md, err := m.create(r.InstanceID, dg, r)
	if err != nil {
		t.Fatal(err)
	}
	md.Intent = m.provisionIntent(r.InstanceID, r)
	if err := m.st.SaveIntent(md); err != nil {
		t.Fatal(err)
	}
	return md
}

// crashAfterRecord lays down what a provision of r leaves when
// supervisord dies once the holder was recorded in the intent, before
// the assignment reached it: leases consumed by the bundle, agent.env,
// the holder's identity (holder pid) in the intent.
func (x *harness) crashAfterRecord(t *testing.T, r *api.ProvisionRequest, pid int) *store.Metadata {
	t.Helper()
	md := x.crashAfterIntent(t, r)
	x.d.register(md.ID, testOwner, len(r.Credentials) > 0)
	grant := &egress.Grant{Record: egress.Record{Registered: true, Credentialed: len(r.Credentials) > 0, Epoch: "epoch-1"},
		Env: map[string]string{"https_proxy": "http://" + md.ID + ":token@127.0.0.1:4750"}}
	if err := x.m.writeEnv(md, grant); err != nil {
		t.Fatal(err)
	}
	md.Intent.Holder = &proc.Identity{PID: pid, StartTime: 100, BootID: "boot"}
	if err := x.m.st.SaveAtomic(md); err != nil {
		t.Fatal(err)
	}
	return md
}

// holderRecord writes the holder.json a holder of pid writes once the
// agent runs.
func (x *harness) holderRecord(t *testing.T, id string, pid int) {
	t.Helper()
	x.writeJSON(t, id, store.FileHolder, store.HolderRecord{Nonce: "n", Holder: proc.Identity{PID: pid, StartTime: 100, BootID: "boot"},
		Agent: proc.Identity{PID: pid + 1, StartTime: 101, BootID: "boot"}, PGID: pid + 1, StartedAt: time.Now().UnixMilli()})
}

// since returns the events after the first n.
func (j *journal) since(n int) []string {
	all := j.list()
	return all[n:]
}

// TestReconcile: what a restart makes of each kind of instance
// directory it finds: a complete instance is brought up to date with its
// holder, a directory without usable metadata is removed (unless
// something may still use it), a provision intent is finished when a
// holder took the instance and undone otherwise, down to its leases and
// bundle; a stop or destroy intent is queued for RunRecovery.
func TestReconcile(t *testing.T) {
	t.Parallel()
	id := testID(6)
	tests := []struct {
		name        string
		setup       func(t *testing.T, x *harness) // the first supervisord, and its crash
		wantDir     bool
		wantState   string // "" when the directory has no readable metadata
		wantReclaim string // the reason of the instance.reclaim record ("" none)
		wantEvents  []string
		check       func(t *testing.T, x *harness)
	}{
		{
			name: "a running instance is adopted, with its holder's restarts",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true, githubCred))
				x.h.restarts[id] = 2
			},
			wantDir: true, wantState: api.StateRunning, wantEvents: []string{},
			check: func(t *testing.T, x *harness) {
				is := is.New(t)
				is.Equal(x.load(t, id).Restarts, 2)
				is.True(x.d.hasBundle(id)) // the owner sweep leaves a live instance's bundle
			},
		},
		{
			name: "an instance whose tree ended gets its exit, and loses its bundle",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true))
				x.h.setLive(id, false)
				x.writeJSON(t, id, store.FileExit, store.ExitRecord{Exit: api.ExitStatus{Code: 3}, ExitedAt: 5, Restarts: 1})
			},
			wantDir: true, wantState: api.StateExited, wantEvents: []string{"bundle.drop " + id},
			check: func(t *testing.T, x *harness) {
				is := is.New(t)
				md := x.load(t, id)
				is.Equal(*md.Exit, api.ExitStatus{Code: 3})
				is.Equal(md.Restarts, 1)
				is.Equal(md.ExitedAt, int64(5))
				is.True(!md.Egress.Registered)
				is.True(!x.d.hasBundle(id))
			},
		},
		{
			name: "a stopped tree is stopped",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true))
				x.h.setLive(id, false)
				x.writeJSON(t, id, store.FileExit, store.ExitRecord{Exit: api.ExitStatus{Signal: "SIGTERM"}, Stopped: true})
			},
			wantDir: true, wantState: api.StateStopped, wantEvents: []string{"bundle.drop " + id},
		},
		{
			name: "a holder gone without an exit record: exited(unknown), the orphan killed",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true))
				x.h.setLive(id, false)
			},
			wantDir: true, wantState: api.StateExited, wantEvents: []string{"holder.kill_orphan " + id + " 1003", "bundle.drop " + id},
			check: func(t *testing.T, x *harness) {
				is := is.New(t)
				is.True(x.load(t, id).Exit.Unknown)
			},
		},
		{
			name:    "an instance never started stays created",
			setup:   func(t *testing.T, x *harness) { x.mustProvision(t, x.req(id, false)) },
			wantDir: true, wantState: api.StateCreated, wantEvents: []string{},
		},
		{
			name: "a directory without metadata (a crash after its mkdir) is removed",
			setup: func(t *testing.T, x *harness) {
				if err := os.MkdirAll(x.m.st.Dir(id), 0o700); err != nil {
					t.Fatal(err)
				}
			},
			wantReclaim: "no_metadata", wantEvents: []string{},
		},
		{
			name: "metadata that is not JSON is removed",
			setup: func(t *testing.T, x *harness) {
				x.writeJSON(t, id, "x", nil)
				if err := os.WriteFile(x.m.st.Path(id, store.FileMetadata), []byte("{\"instance_id\":"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantReclaim: "no_metadata", wantEvents: []string{},
		},
		{
			name: "metadata of another schema version is left for destroy",
			setup: func(t *testing.T, x *harness) {
				x.writeJSON(t, id, store.FileMetadata, map[string]any{"schema_version": 99, "instance_id": id})
			},
			wantDir: true, wantEvents: []string{},
		},
		{
			name: "a directory without metadata whose holder runs is left",
			setup: func(t *testing.T, x *harness) {
				if err := os.MkdirAll(x.m.st.Dir(id), 0o700); err != nil {
					t.Fatal(err)
				}
				x.h.setLive(id, true)
			},
			wantDir: true, wantEvents: []string{},
		},
		{
			name:        "a provision intent, nothing staged: undone",
			setup:       func(t *testing.T, x *harness) { x.crashAfterIntent(t, x.req(id, true, githubCred)) },
			wantReclaim: "provision_undone", wantEvents: []string{"bundle.drop " + id, "lease.revoke " + id},
			check: func(t *testing.T, x *harness) {
				is := is.New(t)
				r := x.audits(t, AuditReclaim)[0]
				is.Equal(r.Fields["leases_revoked"], float64(0))
				is.Equal(r.Fields["bundle_dropped"], false)
			},
		},
		{
			name: "a provision intent, a lease staged: revoked, another owner's kept",
			setup: func(t *testing.T, x *harness) {
				x.crashAfterIntent(t, x.req(id, true, githubCred))
				x.d.stage(id, testOwner, "github")
				x.d.stage(id, "another-owner", "github")
			},
			wantReclaim: "provision_undone", wantEvents: []string{"bundle.drop " + id, "lease.revoke " + id},
			check: func(t *testing.T, x *harness) {
				is := is.New(t)
				is.Equal(x.audits(t, AuditReclaim)[0].Fields["leases_revoked"], float64(1))
				is.Equal(x.d.leaseCount(id), 1) // the other owner's
			},
		},
		{
			name: "a provision intent, the bundle registered: dropped",
			setup: func(t *testing.T, x *harness) {
				x.crashAfterIntent(t, x.req(id, true, githubCred))
				x.d.register(id, testOwner, true)
			},
			wantReclaim: "provision_undone", wantEvents: []string{"bundle.drop " + id, "lease.revoke " + id},
			check: func(t *testing.T, x *harness) {
				is := is.New(t)
				is.Equal(x.audits(t, AuditReclaim)[0].Fields["bundle_dropped"], true)
				is.True(!x.d.hasBundle(id))
			},
		},
		{
			name:        "a provision intent without start and without egress: undone, nothing to release",
			setup:       func(t *testing.T, x *harness) { x.crashAfterIntent(t, x.req(id, false, githubCred)) },
			wantReclaim: "provision_undone", wantEvents: []string{},
		},
		{
			name:        "a provision intent naming a holder that is gone: undone",
			setup:       func(t *testing.T, x *harness) { x.crashAfterRecord(t, x.req(id, true), 4000) },
			wantReclaim: "provision_undone", wantEvents: []string{"bundle.drop " + id},
		},
		{
			name: "a provision intent whose holder wrote holder.json: finished",
			setup: func(t *testing.T, x *harness) {
				x.crashAfterRecord(t, x.req(id, true), 4000)
				x.holderRecord(t, id, 4000)
				x.h.setLive(id, true)
			},
			wantDir: true, wantState: api.StateRunning, wantEvents: []string{},
			check: func(t *testing.T, x *harness) {
				is := is.New(t)
				md := x.load(t, id)
				is.True(md.Intent == nil)
				is.Equal(md.Agent.PID, 4001) // the holder's record wins
				is.True(x.d.hasBundle(id))
			},
		},
		{
			name: "a provision intent whose holder is still starting: waited for, finished",
			setup: func(t *testing.T, x *harness) {
				x.crashAfterRecord(t, x.req(id, true), 4000)
				x.h.setRunning(4000, true)
				rec := store.HolderRecord{Nonce: "n", Holder: proc.Identity{PID: 4000, StartTime: 100, BootID: "boot"},
					Agent: proc.Identity{PID: 4001, StartTime: 101, BootID: "boot"}, PGID: 4001}
				path := x.m.st.Path(id, store.FileHolder)
				go func() { // the holder, a little later
					time.Sleep(50 * time.Millisecond)
					x.h.setLive(id, true)
					if err := store.WriteJSONAtomic(path, rec); err != nil {
						x.j.add("holder.recorded %v", err)
					}
				}()
			},
			wantDir: true, wantState: api.StateRunning, wantEvents: []string{},
		},
		{
			name: "a provision intent whose agent already ended: finished, exited",
			setup: func(t *testing.T, x *harness) {
				x.crashAfterRecord(t, x.req(id, true), 4000)
				x.holderRecord(t, id, 4000)
				x.writeJSON(t, id, store.FileExit, store.ExitRecord{Exit: api.ExitStatus{Code: 0}})
			},
			wantDir: true, wantState: api.StateExited, wantEvents: []string{"bundle.drop " + id},
		},
		{
			name: "a stop intent is left for RunRecovery",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true))
				x.crashAfterBegin(t, id, store.OpStop)
			},
			wantDir: true, wantState: api.StateRunning, wantEvents: []string{},
			check: func(t *testing.T, x *harness) { is.New(t).Equal(x.m.rec.finish, []string{id}) },
		},
		{
			name: "a destroy intent is left for RunRecovery",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true))
				x.crashAfterBegin(t, id, store.OpDestroy)
			},
			wantDir: true, wantState: api.StateRunning, wantEvents: []string{},
			check: func(t *testing.T, x *harness) { is.New(t).Equal(x.m.rec.finish, []string{id}) },
		},
		{
			name: "the trash is emptied",
			setup: func(t *testing.T, x *harness) {
				if err := os.MkdirAll(filepath.Join(x.m.st.Root, store.TrashPrefix+id+"-0a0b0c", "x"), 0o700); err != nil {
					t.Fatal(err)
				}
			},
			wantEvents: []string{},
			check: func(t *testing.T, x *harness) {
				is := is.New(t)
				is.Equal(x.entries(t), []string{})
				is.Equal(x.audits(t, AuditReclaim)[0].Fields["reason"], "trash")
			},
		},
		{
			name: "a name supervisord never makes is left alone",
			setup: func(t *testing.T, x *harness) {
				if err := os.WriteFile(filepath.Join(x.m.st.Root, "notes.txt"), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			wantEvents: []string{},
			check:      func(t *testing.T, x *harness) { is.New(t).Equal(x.entries(t), []string{"notes.txt"}) },
		},
		{
			name: "leftovers of our owner id that no instance claims are released, another owner's kept",
			setup: func(t *testing.T, x *harness) {
				x.d.stage(id, testOwner, "github")
				x.d.register(id, testOwner, true)
				x.d.stage(testID(7), "another-owner", "github")
				x.d.register(testID(7), "another-owner", true)
			},
			wantEvents: []string{"bundle.drop " + id, "lease.revoke " + id},
			check: func(t *testing.T, x *harness) {
				is := is.New(t)
				is.Equal(x.d.leaseCount(id), 0)
				is.True(!x.d.hasBundle(id))
				is.Equal(x.d.leaseCount(testID(7)), 1)
				is.True(x.d.hasBundle(testID(7)))
				recs := x.audits(t, AuditEgressReclaim)
				is.Equal(len(recs), 1)
				is.Equal(recs[0].Fields["invocation"], id)
				is.Equal(recs[0].Outcome, string(audit.OutcomeOK))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, opts{root: true})
			tt.setup(t, x)
			x.m = x.restart(t)
			n := len(x.j.list())
			x.m.Reconcile(context.Background())
			is.Equal(x.j.since(n), tt.wantEvents)
			is.Equal(x.exists(t, id), tt.wantDir)
			if tt.wantState != "" {
				is.Equal(x.load(t, id).State, tt.wantState)
			}
			var reasons []string
			for _, r := range x.audits(t, AuditReclaim) {
				if r.Fields["instance_id"] == id {
					reasons = append(reasons, r.Fields["reason"].(string))
				}
			}
			if tt.wantReclaim == "" {
				is.Equal(len(reasons), 0)
			} else {
				is.Equal(reasons, []string{tt.wantReclaim})
			}
			if tt.check != nil {
				tt.check(t, x)
			}
		})
	}
}

// crashAfterBegin writes op's intent into instance id's metadata, as a
// stop or destroy does first, and nothing more.
func (x *harness) crashAfterBegin(t *testing.T, id, op string) {
	t.Helper()
	md := x.load(t, id)
	if err := x.m.beginIntent(op, md); err != nil {
		t.Fatal(err)
	}
}
