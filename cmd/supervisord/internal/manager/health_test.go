//go:build linux

package manager

import (
	"context"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// TestHealth: health counts the instances by the state status shows and
// says, in its warning, what isolation is missing.
func TestHealth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		o             opts
		setup         func(t *testing.T, x *harness)
		wantCounts    map[string]int64
		wantIsolation bool
		wantWarning   string // "" when health carries none
	}{
		{
			name: "not root: counts by state, the agents not isolated",
			o:    opts{noEgress: true},
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(testID(30), true))
				x.mustProvision(t, x.req(testID(31), false))
				x.mustProvision(t, x.req(testID(32), true))
				if _, err := x.m.Stop(context.Background(), testID(32)); err != nil {
					t.Fatal(err)
				}
			},
			wantCounts:  map[string]int64{api.StateRunning: 1, api.StateCreated: 1, api.StateStopped: 1},
			wantWarning: api.NotIsolatedWarning,
		},
		{
			name: "root, isolated the default, no proxy socket",
			o:    opts{noEgress: true, root: true},
			setup: func(t *testing.T, x *harness) {
				x.m.cfg.DefaultNetwork = api.NetworkIsolated
			},
			wantCounts:  map[string]int64{},
			wantWarning: "NETWORK ISOLATION UNAVAILABLE: instances that name no network fail with network.unavailable",
		},
		{
			name: "root, with isolation",
			o:    opts{noEgress: true, root: true},
			setup: func(t *testing.T, x *harness) {
				x.m.cfg.DefaultNetwork, x.m.cfg.ProxySocket = api.NetworkIsolated, "/run/egressd/proxy.sock"
			},
			wantCounts: map[string]int64{}, wantIsolation: true,
		},
		{
			name: "a bundle of egressd's previous epoch is credentials_lost",
			o:    opts{root: true},
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(testID(30), true, githubCred))
				x.d.setEpoch("epoch-2")
				x.mustProvision(t, x.req(testID(31), true, githubCred)) // the client learns the new epoch
			},
			wantCounts: map[string]int64{api.StateCredsLost: 1, api.StateRunning: 1},
		},
		{
			name: "a bundle without credentials is not lost with the epoch",
			o:    opts{root: true},
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(testID(30), true))
				x.d.setEpoch("epoch-2")
				x.mustProvision(t, x.req(testID(31), true))
			},
			wantCounts: map[string]int64{api.StateRunning: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, tt.o)
			tt.setup(t, x)
			h := x.m.Health()
			is.Equal(h["instances"], tt.wantCounts)
			is.Equal(h["agents_isolated"], tt.o.root)
			is.Equal(h["network_isolation"], tt.wantIsolation)
			is.Equal(h["nftables"], "unknown")
			w, _ := h["warning"].(string)
			is.Equal(w, tt.wantWarning)
		})
	}
}

// TestStatusCredentialsLost: status shows a credentialed instance whose
// bundle egressd forgot as credentials_lost, and the reason once a
// re-registration failed.
func TestStatusCredentialsLost(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	x := newHarness(t, opts{})
	id := testID(33)
	x.mustProvision(t, x.req(id, true, githubCred))
	in, err := x.m.Status(context.Background(), id)
	is.NoErr(err)
	is.Equal(in.State, api.StateRunning)
	is.True(strings.Contains(in.Warning, api.HostNetworkWarning))

	x.d.setEpoch("epoch-2")
	x.mustProvision(t, x.req(testID(34), true))
	in, err = x.m.Status(context.Background(), id)
	is.NoErr(err)
	is.Equal(in.State, api.StateCredsLost)

	md := x.load(t, id)
	md.Egress.Lost = "bundle.register: egress.unavailable"
	is.NoErr(x.m.st.Save(md))
	in, err = x.m.Status(context.Background(), id)
	is.NoErr(err)
	is.True(strings.Contains(in.Warning, "not registered again: bundle.register: egress.unavailable"))
}

// TestSweepEgress: the egress sweep drops the bundle of every instance
// whose tree ended on its own, and of no other; a release a daemon did
// not answer is tried again by the owner sweep.
func TestSweepEgress(t *testing.T) {
	t.Parallel()
	id := testID(35)
	tests := []struct {
		name       string
		setup      func(t *testing.T, x *harness)
		sweep      func(x *harness)
		wantEvents []string
		wantBundle bool
	}{
		{
			name:       "a running instance keeps its bundle",
			setup:      func(t *testing.T, x *harness) { x.mustProvision(t, x.req(id, true)) },
			wantEvents: []string{}, wantBundle: true,
		},
		{
			name: "a tree that ended loses it",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true, githubCred))
				x.h.setLive(id, false)
				x.writeJSON(t, id, store.FileExit, store.ExitRecord{Exit: api.ExitStatus{Code: 1}})
			},
			wantEvents: []string{"bundle.drop " + id, "lease.revoke " + id},
		},
		{
			name: "a holder gone without a trace loses it",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true))
				x.h.setLive(id, false)
			},
			wantEvents: []string{"holder.kill_orphan " + id + " 1003", "bundle.drop " + id},
		},
		{
			name: "an operation under way releases it itself",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true))
				x.h.setLive(id, false)
				x.crashAfterBegin(t, id, store.OpStop)
			},
			wantEvents: []string{}, wantBundle: true,
		},
		{
			name: "a drop egressd did not answer is retried by the owner sweep",
			setup: func(t *testing.T, x *harness) {
				x.mustProvision(t, x.req(id, true))
				x.d.failOp(egressdapi.OpBundleDrop, wire.Errorf(wire.CodeUnavailable, "down"))
				if _, err := x.m.Stop(context.Background(), id); err != nil {
					t.Fatal(err)
				}
				if !x.m.rec.due.Load() {
					t.Fatal("the owner sweep is not due")
				}
				x.d.failOp(egressdapi.OpBundleDrop, nil)
			},
			sweep:      func(x *harness) { x.m.sweepOwned(context.Background()) },
			wantEvents: []string{"bundle.drop " + id},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			x := newHarness(t, opts{})
			tt.setup(t, x)
			n := len(x.j.list())
			if tt.sweep == nil {
				x.m.sweepEgress(context.Background())
			} else {
				tt.sweep(x)
			}
			is.Equal(x.j.since(n), tt.wantEvents)
			is.Equal(x.d.hasBundle(id), tt.wantBundle)
			is.True(!x.m.rec.due.Load())
		})
	}
}
