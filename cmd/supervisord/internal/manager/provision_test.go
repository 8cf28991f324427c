//go:build linux

package manager

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// entries lists the instances directory: instance directories, the
// trash, anything else.
func (x *harness) entries(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(x.m.st.Root)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// agentEnv reads instance id's agent.env into a map.
func (x *harness) agentEnv(t *testing.T, id string) map[string]string {
	t.Helper()
	kv, err := store.ReadEnv(x.m.st.Path(id, store.FileAgentEnv))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		env[k] = v
	}
	return env
}

// TestProvision: what a provision that succeeds leaves on disk, at the
// daemons and at the holder side, and in which order it got there: the
// provision intent is on disk before anything is staged, registered or
// assigned, and is cleared once the agent runs.
func TestProvision(t *testing.T) {
	t.Parallel()
	id := testID(1)
	tests := []struct {
		name       string
		o          opts
		req        func(x *harness) *api.ProvisionRequest
		wantState  string
		wantEvents []string
		wantBundle bool   // a bundle is registered for the instance
		wantUID    int    // the agent uid in the spec
		wantEnv    string // a variable agent.env must hold, as K=V
	}{
		{
			name:      "not started",
			req:       func(x *harness) *api.ProvisionRequest { return x.req(id, false) },
			wantState: api.StateCreated, wantEvents: []string{}, wantUID: -1, wantEnv: "HOSTKIT_INSTANCE_ID=" + id,
		},
		{
			name:      "not started, with a credential: staged at the start, not now",
			req:       func(x *harness) *api.ProvisionRequest { return x.req(id, false, githubCred) },
			wantState: api.StateCreated, wantEvents: []string{}, wantUID: -1, wantEnv: "HOSTKIT_WATCH_AGENT=host-00000001",
		},
		{
			name:      "started without credentials",
			req:       func(x *harness) *api.ProvisionRequest { return x.req(id, true) },
			wantState: api.StateRunning, wantBundle: true, wantUID: -1, wantEnv: "NODE_USE_ENV_PROXY=1",
			wantEvents: []string{"bundle.register " + id + " intent=provision", "holder.start " + id + " intent=provision"},
		},
		{
			name:      "started with a credential",
			req:       func(x *harness) *api.ProvisionRequest { return x.req(id, true, githubCred) },
			wantState: api.StateRunning, wantBundle: true, wantUID: -1, wantEnv: "GITHUB_TOKEN=PLACEHOLDER1",
			wantEvents: []string{"lease.stage " + id + " github intent=provision", "bundle.register " + id + " intent=provision",
				"holder.start " + id + " intent=provision"},
		},
		{
			name:      "started as root: the agent gets the lowest uid of the range",
			o:         opts{root: true},
			req:       func(x *harness) *api.ProvisionRequest { return x.req(id, true) },
			wantState: api.StateRunning, wantBundle: true, wantUID: 60000, wantEnv: "HOSTKIT_WATCH_AGENT=host-00000001",
			wantEvents: []string{"bundle.register " + id + " intent=provision", "holder.start " + id + " intent=provision"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, tt.o)
			in, err := x.m.Provision(context.Background(), tt.req(x))
			is.NoErr(err)
			is.Equal(in.InstanceID, id)
			is.Equal(in.State, tt.wantState)
			is.Equal(x.j.list(), tt.wantEvents) // the steps, in order, each with the intent on disk

			md := x.load(t, id)
			is.Equal(md.State, tt.wantState)
			is.True(md.Intent == nil) // done: nothing for reconcile to finish
			is.Equal(md.Spec.AgentUID, tt.wantUID)
			is.Equal(x.uidHeld(id), tt.o.root)
			is.Equal(x.d.hasBundle(id), tt.wantBundle)
			is.Equal(md.Egress != nil && md.Egress.Registered, tt.wantBundle)
			is.Equal(x.d.leaseCount(id), 0) // staged leases were consumed by the registration
			k, v, _ := strings.Cut(tt.wantEnv, "=")
			is.Equal(x.agentEnv(t, id)[k], v)
			_, err = os.Stat(x.m.st.Path(id, store.FileHolder))
			is.Equal(err == nil, tt.wantState == api.StateRunning) // the answer waited for holder.json
			if tt.wantState == api.StateRunning {
				is.Equal(md.Agent.PID, md.Holder.PID+1) // the Ready record, saved
			}
		})
	}
}

// TestProvisionUndo: every way a provision fails, and what its undo
// leaves: before the agent could be started, nothing (no directory, no
// uid, no lease, no bundle); once a holder was asked, an exited(unknown)
// instance whose egress was released.
func TestProvisionUndo(t *testing.T) {
	t.Parallel()
	id := testID(2)
	refused := func(code string) error { return wire.Errorf(code, "refused by the test") }
	tests := []struct {
		name       string
		o          opts
		setup      func(x *harness)
		req        func(x *harness) *api.ProvisionRequest
		wantCode   string
		wantDir    bool // an exited(unknown) instance stays
		wantEvents []string
	}{
		{
			name:     "secretd refuses the lease",
			setup:    func(x *harness) { x.d.failOp(secretdapi.OpLeaseStage, refused("credential.not_found")) },
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true, githubCred) },
			wantCode: api.CodeCredentialsUnavailable, wantEvents: []string{"lease.stage " + id + " github intent=provision"},
		},
		{
			name:     "egressd refuses the bundle: its leases are revoked",
			setup:    func(x *harness) { x.d.failOp(egressdapi.OpBundleRegister, refused(egressdapi.CodeBundleInvalid)) },
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true, githubCred) },
			wantCode: api.CodeCredentialsUnavailable,
			wantEvents: []string{"lease.stage " + id + " github intent=provision", "bundle.register " + id + " intent=provision",
				"bundle.drop " + id, "lease.revoke " + id},
		},
		{
			name:     "egressd does not answer: egress is required",
			setup:    func(x *harness) { x.d.stopEG() },
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true) },
			wantCode: api.CodeCredentialsUnavailable, wantEvents: []string{},
		},
		{
			name:     "secretd does not answer a provision that does not start",
			setup:    func(x *harness) { x.d.failOp(healthapi.Op, refused(wire.CodeUnavailable)) },
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, false, githubCred) },
			wantCode: api.CodeCredentialsUnavailable, wantEvents: []string{},
		},
		{
			name:     "a placeholder agent.env cannot hold: the bundle is dropped, the leases revoked",
			setup:    func(x *harness) { x.d.ph = "two\nlines" },
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true, githubCred) },
			wantCode: api.CodeInstanceInvalid,
			wantEvents: []string{"lease.stage " + id + " github intent=provision", "bundle.register " + id + " intent=provision",
				"bundle.drop " + id, "lease.revoke " + id},
		},
		{
			name:     "no egress configured, a credential asked for",
			o:        opts{noEgress: true},
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true, githubCred) },
			wantCode: api.CodeCredentialsUnavailable, wantEvents: []string{},
		},
		{
			name: "an environment agent.env cannot hold",
			req: func(x *harness) *api.ProvisionRequest {
				r := x.req(id, true)
				r.Env = map[string]string{"NOTE": "two\nlines"}
				return r
			},
			wantCode: api.CodeInstanceInvalid, wantEvents: []string{},
		},
		{
			name:     "no holder starts: the bundle is dropped, the instance stays exited",
			setup:    func(x *harness) { x.h.startErr = errors.New("fork/exec: resource temporarily unavailable") },
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true, githubCred) },
			wantCode: api.CodeInstanceSpawnFailed, wantDir: true,
			wantEvents: []string{"lease.stage " + id + " github intent=provision", "bundle.register " + id + " intent=provision",
				"holder.start " + id + " failed", "bundle.drop " + id, "lease.revoke " + id},
		},
		{
			name:     "the holder does not report ready in time",
			setup:    func(x *harness) { x.h.startErr = os.ErrDeadlineExceeded },
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true) },
			wantCode: api.CodeInstanceSpawnFailed, wantDir: true,
			wantEvents: []string{"bundle.register " + id + " intent=provision", "holder.start " + id + " failed", "bundle.drop " + id},
		},
		{
			name:     "the holder cannot make the namespace: its code, never a fallback",
			setup:    func(x *harness) { x.h.refuse = api.CodeNetworkUnavailable },
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true) },
			wantCode: api.CodeNetworkUnavailable, wantDir: true,
			wantEvents: []string{"bundle.register " + id + " intent=provision", "holder.start " + id + " intent=provision", "bundle.drop " + id},
		},
		{
			name:     "the agent cannot start: spawn_failed whatever the holder's code",
			setup:    func(x *harness) { x.h.refuse = "exec.not_found" },
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true) },
			wantCode: api.CodeInstanceSpawnFailed, wantDir: true,
			wantEvents: []string{"bundle.register " + id + " intent=provision", "holder.start " + id + " intent=provision", "bundle.drop " + id},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			tt.o.root = true // so that a uid is allocated, and must be freed
			x := newHarness(t, tt.o)
			if tt.setup != nil {
				tt.setup(x)
			}
			_, err := x.m.Provision(context.Background(), tt.req(x))
			is.Equal(wire.CodeOf(err), tt.wantCode)
			is.Equal(x.j.list(), tt.wantEvents)
			if x.d != nil {
				is.Equal(x.d.leaseCount(id), 0) // nothing staged is left
				is.True(!x.d.hasBundle(id))     // nor registered
			}
			is.Equal(x.uidHeld(id), tt.wantDir) // the uid stays with an instance that stays
			if !tt.wantDir {
				is.Equal(x.entries(t), []string{}) // no directory, no trash
				return
			}
			md := x.load(t, id)
			is.Equal(md.State, api.StateExited)
			is.True(md.Exit != nil && md.Exit.Unknown)
			is.True(md.Intent == nil) // nothing left for reconcile
			is.True(md.Egress != nil && !md.Egress.Registered)
		})
	}
}

// TestProvisionRefused: a request that fails validation makes nothing
// and calls nothing.
func TestProvisionRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		edit     func(x *harness, r *api.ProvisionRequest)
		wantCode string
	}{
		{"an id that is no UUID", func(x *harness, r *api.ProvisionRequest) { r.InstanceID = "instance-1" }, api.CodeInstanceInvalidID},
		{"an id with a bad digit", func(x *harness, r *api.ProvisionRequest) { r.InstanceID = "0000000g-0000-4000-8000-000000000001" }, api.CodeInstanceInvalidID},
		{"no command", func(x *harness, r *api.ProvisionRequest) { r.Command = nil }, api.CodeInstanceInvalid},
		{"a NUL in an argument", func(x *harness, r *api.ProvisionRequest) { r.Command = []string{"/bin/echo", "a\x00b"} }, api.CodeInstanceInvalid},
		{"a relative working directory", func(x *harness, r *api.ProvisionRequest) { r.WorkingDir = "work" }, api.CodeWorkingDirNotFound},
		{"a missing working directory", func(x *harness, r *api.ProvisionRequest) { r.WorkingDir = x.work + "/gone" }, api.CodeWorkingDirNotFound},
		{"a stop timeout below 1 s", func(x *harness, r *api.ProvisionRequest) { r.StopTimeoutMS = 999 }, api.CodeInstanceInvalid},
		{"an image for the host runtime", func(x *harness, r *api.ProvisionRequest) { r.Image = &api.ImageRef{} }, api.CodeInstanceInvalid},
		{"an unknown runtime", func(x *harness, r *api.ProvisionRequest) { r.Runtime = "vm" }, api.CodeInstanceInvalid},
		{"a container without a helper", func(x *harness, r *api.ProvisionRequest) { r.Runtime = api.RuntimeContainer }, api.CodeRuntimeUnavailable},
		{"restart always", func(x *harness, r *api.ProvisionRequest) { r.Restart = "always" }, api.CodeInstanceInvalid},
		{"max_restarts without on-failure", func(x *harness, r *api.ProvisionRequest) { r.MaxRestarts = 3 }, api.CodeInstanceInvalid},
		{"max_restarts past 1000", func(x *harness, r *api.ProvisionRequest) { r.Restart, r.MaxRestarts = api.RestartOnFailure, 1001 }, api.CodeInstanceInvalid},
		{"an unknown session backend", func(x *harness, r *api.ProvisionRequest) { r.SessionBackend = "screen" }, api.CodeInstanceInvalid},
		{"an unknown network mode", func(x *harness, r *api.ProvisionRequest) { r.Network = &api.Network{Mode: "bridge"} }, api.CodeInstanceInvalid},
		{"network isolated, not root", func(x *harness, r *api.ProvisionRequest) { r.Network = &api.Network{Mode: api.NetworkIsolated} }, api.CodeNetworkUnavailable},
		{"a credential without its env", func(x *harness, r *api.ProvisionRequest) {
			r.Credentials = []api.CredentialSpec{{Credential: "github"}}
		}, api.CodeInstanceInvalid},
		{"the host runtime off", func(x *harness, r *api.ProvisionRequest) { x.m.cfg.HostRuntimeEnabled = false }, api.CodeRuntimeNotImplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, opts{})
			r := x.req(testID(3), true)
			tt.edit(x, r)
			_, err := x.m.Provision(context.Background(), r)
			is.Equal(wire.CodeOf(err), tt.wantCode)
			is.Equal(x.entries(t), []string{})
			is.Equal(x.j.list(), []string{})
		})
	}
}

// TestProvisionID: ids are canonical, and a provision is idempotent on
// its id: the same request answers the instance, another is a conflict,
// and a directory without metadata blocks the id without being touched.
func TestProvisionID(t *testing.T) {
	t.Parallel()
	id := testID(4)
	tests := []struct {
		name      string
		first     func(t *testing.T, x *harness)                     // what exists before the provision
		req       func(x *harness) *api.ProvisionRequest             // the provision
		wantCode  string                                             // its error code
		wantID    func(in *api.Instance) bool                        // its instance id is right
		wantStart int                                                // holders started in all
		check     func(t *testing.T, x *harness, md *store.Metadata) // what is on disk (md nil: none readable)
	}{
		{
			name: "an upper-case id is made canonical",
			req: func(x *harness) *api.ProvisionRequest {
				return x.req(strings.ToUpper(id), true)
			},
			wantID: func(in *api.Instance) bool { return in.InstanceID == id }, wantStart: 1,
		},
		{
			name: "no id: a fresh one",
			req: func(x *harness) *api.ProvisionRequest {
				return x.req("", false)
			},
			wantID: func(in *api.Instance) bool {
				c, err := api.CanonicalID(in.InstanceID)
				return err == nil && c == in.InstanceID
			},
		},
		{
			name:  "the same request again answers the instance",
			first: func(t *testing.T, x *harness) { x.mustProvision(t, x.req(id, true)) },
			req: func(x *harness) *api.ProvisionRequest {
				return x.req(id, true)
			},
			wantID: func(in *api.Instance) bool { return in.InstanceID == id && in.State == api.StateRunning }, wantStart: 1,
		},
		{
			name:  "another request with the same id is a conflict",
			first: func(t *testing.T, x *harness) { x.mustProvision(t, x.req(id, true)) },
			req: func(x *harness) *api.ProvisionRequest {
				r := x.req(id, true)
				r.Command = []string{"/bin/false"}
				return r
			},
			wantCode: api.CodeInstanceConflict, wantStart: 1,
			check: func(t *testing.T, x *harness, md *store.Metadata) {
				is := is.New(t)
				is.Equal(md.Request.Command, []string{"/bin/true"}) // untouched
				is.Equal(md.State, api.StateRunning)
			},
		},
		{
			name: "a directory without metadata blocks the id and stays",
			first: func(t *testing.T, x *harness) {
				if err := os.Mkdir(x.m.st.Dir(id), 0o700); err != nil {
					t.Fatal(err)
				}
			},
			req:      func(x *harness) *api.ProvisionRequest { return x.req(id, true) },
			wantCode: api.CodeInstanceExists,
			check: func(t *testing.T, x *harness, md *store.Metadata) {
				is := is.New(t)
				is.True(md == nil)
				is.Equal(x.entries(t), []string{id})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, opts{})
			if tt.first != nil {
				tt.first(t, x)
			}
			in, err := x.m.Provision(context.Background(), tt.req(x))
			is.Equal(wire.CodeOf(err), tt.wantCode)
			if tt.wantID != nil {
				is.True(tt.wantID(in))
			}
			is.Equal(len(x.j.list("holder.start")), tt.wantStart)
			if tt.check != nil {
				md, _ := x.m.st.Load(id)
				tt.check(t, x, md)
			}
		})
	}
}

// mustProvision provisions r, a setup step.
func (x *harness) mustProvision(t *testing.T, r *api.ProvisionRequest) *api.Instance {
	t.Helper()
	in, err := x.m.Provision(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestProvisionRestartPolicy: the restart policy of the request is the
// spec the holder gets, with on-failure's default bound.
func TestProvisionRestartPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		restart         string
		max             int64
		wantRestart     string
		wantMaxRestarts int
	}{
		{"none named: never", "", 0, api.RestartNever, 0},
		{"never", api.RestartNever, 0, api.RestartNever, 0},
		{"on-failure: the default bound", api.RestartOnFailure, 0, api.RestartOnFailure, api.DefaultMaxRestarts},
		{"on-failure: its own bound", api.RestartOnFailure, 3, api.RestartOnFailure, 3},
		{"on-failure: the highest bound", api.RestartOnFailure, api.MaxMaxRestarts, api.RestartOnFailure, api.MaxMaxRestarts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, opts{noEgress: true})
			r := x.req(testID(5), false)
			r.Restart, r.MaxRestarts = tt.restart, tt.max
			in, err := x.m.Provision(context.Background(), r)
			is.NoErr(err)
			is.Equal(in.Restart, tt.wantRestart)
			md := x.load(t, testID(5))
			is.Equal(md.Spec.Restart, tt.wantRestart)
			is.Equal(md.Spec.MaxRestarts, tt.wantMaxRestarts)
		})
	}
}
