//go:build linux

package manager

import (
	"context"
	"os"
	"testing"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// finishQueued finishes the stop and destroy intents Reconcile queued,
// each as RunRecovery does, and returns when all are done.
func (x *harness) finishQueued() {
	x.m.rec.mu.Lock()
	ids := x.m.rec.finish
	x.m.rec.finish = nil
	x.m.rec.mu.Unlock()
	for _, id := range ids {
		x.m.finishIntent(context.Background(), id)
	}
}

// TestFinishIntent: a stop or destroy a crash interrupted at any step is
// finished by the next supervisord: what is still to do is done (the
// tree stopped, the bundle dropped and the leases revoked, the directory
// removed), what was done is not done again.
func TestFinishIntent(t *testing.T) {
	t.Parallel()
	id := testID(8)
	tests := []struct {
		name       string
		op         string
		crash      func(t *testing.T, x *harness) // what the first supervisord did of op before it died
		wantDir    bool
		wantState  string
		wantEvents []string
	}{
		{
			name: "stop, nothing done yet", op: store.OpStop,
			crash:   func(t *testing.T, x *harness) {},
			wantDir: true, wantState: api.StateStopped,
			wantEvents: []string{"holder.stop " + id + " 10000", "bundle.drop " + id, "lease.revoke " + id},
		},
		{
			name: "stop, the tree already gone", op: store.OpStop,
			crash:   func(t *testing.T, x *harness) { x.h.stop(context.Background(), id, 0) },
			wantDir: true, wantState: api.StateStopped,
			wantEvents: []string{"bundle.drop " + id, "lease.revoke " + id},
		},
		{
			name: "stop, the egress already released", op: store.OpStop,
			crash: func(t *testing.T, x *harness) {
				x.h.stop(context.Background(), id, 0)
				x.releasedBefore(t, id)
			},
			wantDir: true, wantState: api.StateStopped, wantEvents: []string{},
		},
		{
			name: "destroy, nothing done yet", op: store.OpDestroy,
			crash:      func(t *testing.T, x *harness) {},
			wantEvents: []string{"holder.stop " + id + " 10000", "bundle.drop " + id, "lease.revoke " + id},
		},
		{
			name: "destroy, the egress already released", op: store.OpDestroy,
			crash: func(t *testing.T, x *harness) {
				x.h.stop(context.Background(), id, 0)
				x.releasedBefore(t, id)
			},
			wantEvents: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, opts{root: true})
			x.mustProvision(t, x.req(id, true, githubCred))
			x.crashAfterBegin(t, id, tt.op)
			tt.crash(t, x)
			x.m = x.restart(t)
			x.m.Reconcile(context.Background())
			n := len(x.j.list())
			x.finishQueued()
			is.Equal(x.j.since(n), tt.wantEvents)
			is.True(!x.d.hasBundle(id))
			is.Equal(x.exists(t, id), tt.wantDir)
			if tt.wantDir {
				md := x.load(t, id)
				is.Equal(md.State, tt.wantState)
				is.True(md.Intent == nil) // finished: nothing left for the next start
				is.True(!md.Egress.Registered)
			} else {
				is.Equal(x.entries(t), []string{})
			}
		})
	}
}

// releasedBefore releases instance id's egress and records it, as a stop
// or destroy does before its last step.
func (x *harness) releasedBefore(t *testing.T, id string) {
	t.Helper()
	md := x.load(t, id)
	x.m.releaseEgressSaved(context.Background(), md)
}

// TestStopDestroy: stop ends the tree and releases the egress once,
// keeping the instance; destroy also removes the directory and frees
// the uid; both refuse what is no instance.
func TestStopDestroy(t *testing.T) {
	t.Parallel()
	id := testID(9)
	tests := []struct {
		name       string
		first      func(t *testing.T, x *harness)
		do         func(x *harness) error
		wantCode   string
		wantDir    bool
		wantState  string
		wantEvents []string
	}{
		{
			name:  "stop a running instance",
			first: func(t *testing.T, x *harness) { x.mustProvision(t, x.req(id, true, githubCred)) },
			do: func(x *harness) error {
				in, err := x.m.Stop(context.Background(), id)
				if err == nil && in.State != api.StateStopped {
					return wire.Errorf("test.state", "state %s", in.State)
				}
				return err
			},
			wantDir: true, wantState: api.StateStopped,
			wantEvents: []string{"holder.stop " + id + " 10000", "bundle.drop " + id, "lease.revoke " + id},
		},
		{
			name: "stop twice: the second has nothing to do",
			first: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true))
				if _, err := x.m.Stop(context.Background(), id); err != nil {
					t.Fatal(err)
				}
			},
			do:      func(x *harness) error { _, err := x.m.Stop(context.Background(), id); return err },
			wantDir: true, wantState: api.StateStopped, wantEvents: []string{},
		},
		{
			name:  "stop an instance never started",
			first: func(t *testing.T, x *harness) { x.mustProvision(t, x.req(id, false)) },
			do:    func(x *harness) error { _, err := x.m.Stop(context.Background(), id); return err },
			// Created is not terminal: the intent is written and cleared,
			// there is no holder to ask.
			wantDir: true, wantState: api.StateCreated, wantEvents: []string{},
		},
		{
			name:       "stop what is no instance",
			do:         func(x *harness) error { _, err := x.m.Stop(context.Background(), id); return err },
			wantCode:   api.CodeInstanceNotFound,
			wantEvents: []string{},
		},
		{
			name:       "destroy a running instance",
			first:      func(t *testing.T, x *harness) { x.mustProvision(t, x.req(id, true, githubCred)) },
			do:         func(x *harness) error { return x.m.Destroy(context.Background(), id) },
			wantEvents: []string{"holder.stop " + id + " 10000", "bundle.drop " + id, "lease.revoke " + id},
		},
		{
			name: "destroy a half-made directory",
			first: func(t *testing.T, x *harness) {
				if err := os.Mkdir(x.m.st.Dir(id), 0o700); err != nil {
					t.Fatal(err)
				}
			},
			do:         func(x *harness) error { return x.m.Destroy(context.Background(), id) },
			wantEvents: []string{},
		},
		{
			name:       "destroy what is no instance",
			do:         func(x *harness) error { return x.m.Destroy(context.Background(), id) },
			wantCode:   api.CodeInstanceNotFound,
			wantEvents: []string{},
		},
		{
			name:       "destroy an id that is no UUID",
			do:         func(x *harness) error { return x.m.Destroy(context.Background(), "../etc") },
			wantCode:   api.CodeInstanceInvalidID,
			wantEvents: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, opts{root: true})
			if tt.first != nil {
				tt.first(t, x)
			}
			n := len(x.j.list())
			is.Equal(wire.CodeOf(tt.do(x)), tt.wantCode)
			is.Equal(x.j.since(n), tt.wantEvents)
			is.True(!x.d.hasBundle(id))
			is.Equal(x.d.leaseCount(id), 0)
			is.Equal(x.exists(t, id), tt.wantDir)
			is.Equal(x.uidHeld(id), tt.wantDir) // destroy frees the uid
			if tt.wantDir {
				md := x.load(t, id)
				is.Equal(md.State, tt.wantState)
				is.True(md.Intent == nil)
			} else {
				is.Equal(x.entries(t), []string{}) // no trash left either
			}
		})
	}
}

// TestSignal: a signal reaches a running instance's holder by number;
// anything else is refused before the holder is asked.
func TestSignal(t *testing.T) {
	t.Parallel()
	id := testID(10)
	tests := []struct {
		name       string
		running    bool
		sig        string
		wantCode   string
		wantEvents []string
	}{
		{"by name", true, "TERM", "", []string{"holder.signal " + id + " 15"}},
		{"with SIG", true, "sigusr1", "", []string{"holder.signal " + id + " 10"}},
		{"by number", true, "64", "", []string{"holder.signal " + id + " 64"}},
		{"an unknown name", true, "SIGFOO", api.CodeSignalInvalid, []string{}},
		{"a number past 64", true, "65", api.CodeSignalInvalid, []string{}},
		{"an instance that ended", false, "TERM", api.CodeInstanceNotRunning, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, opts{noEgress: true})
			x.mustProvision(t, x.req(id, true))
			x.h.setLive(id, tt.running)
			n := len(x.j.list())
			is.Equal(wire.CodeOf(x.m.Signal(context.Background(), id, tt.sig)), tt.wantCode)
			is.Equal(x.j.since(n), tt.wantEvents)
		})
	}
}

// TestUIDAllocation: as root each instance gets the lowest free uid of
// the range, counting the instances on disk; the range exhausted, a
// provision fails with nothing made; destroy frees a uid.
func TestUIDAllocation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		min, max int
		steps    func(t *testing.T, x *harness) // before the provision of the last id
		wantUID  int
		wantCode string
	}{
		{
			name: "the lowest free uid", min: 60000, max: 60002,
			steps:   func(t *testing.T, x *harness) { x.mustProvision(t, x.req(testID(20), false)) },
			wantUID: 60001,
		},
		{
			name: "the range exhausted", min: 60000, max: 60001,
			steps: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(testID(20), false))
				x.mustProvision(t, x.req(testID(21), false))
			},
			wantCode: api.CodeUIDExhausted,
		},
		{
			name: "destroy frees its uid", min: 60000, max: 60001,
			steps: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(testID(20), false))
				x.mustProvision(t, x.req(testID(21), false))
				if err := x.m.Destroy(context.Background(), testID(20)); err != nil {
					t.Fatal(err)
				}
			},
			wantUID: 60000,
		},
		{
			name: "a failed provision frees its uid", min: 60000, max: 60000,
			steps: func(t *testing.T, x *harness) {
				r := x.req(testID(20), false)
				r.Env = map[string]string{"NOTE": "two\nlines"}
				if _, err := x.m.Provision(context.Background(), r); err == nil {
					t.Fatal("provisioned")
				}
			},
			wantUID: 60000,
		},
		{
			name: "the instances on disk hold theirs after a restart", min: 60000, max: 60002,
			steps: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(testID(20), false))
				x.m = x.restart(t)
			},
			wantUID: 60001,
		},
		{
			name: "an exited instance keeps its uid", min: 60000, max: 60000,
			steps: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(testID(20), true))
				if _, err := x.m.Stop(context.Background(), testID(20)); err != nil {
					t.Fatal(err)
				}
				x.m = x.restart(t)
			},
			wantCode: api.CodeUIDExhausted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, opts{root: true, uidMin: tt.min, uidMax: tt.max})
			tt.steps(t, x)
			id := testID(29)
			in, err := x.m.Provision(context.Background(), x.req(id, false))
			is.Equal(wire.CodeOf(err), tt.wantCode)
			if tt.wantCode != "" {
				is.True(!x.exists(t, id))
				is.True(!x.uidHeld(id))
				return
			}
			is.Equal(int(in.AgentUID), tt.wantUID)
			is.True(in.Isolated)
			is.Equal(x.load(t, id).Spec.AgentUID, tt.wantUID)
		})
	}
}
