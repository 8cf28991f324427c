//go:build linux

package manager

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/healthapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/store"
)

// daemons is a fake secretd and a fake egressd, each serving the ops the
// egress client calls on a real socket, sharing one record of what is
// staged and registered: the manager reaches them through its real
// egress client, and a test reads what a provision or its undo left
// there. Registering a bundle consumes its leases, as egressd does.
type daemons struct {
	j       *journal
	root    string // the instances directory: which intent is on disk when a step comes
	sdSock  string
	egSock  string
	stopSD  func() // secretd stops answering
	stopEG  func() // egressd stops answering
	mu      sync.Mutex
	leases  map[string]fakeLease  // handle → an unconsumed lease
	bundles map[string]fakeBundle // invocation → its bundle
	n       int                   // leases staged so far
	epoch   string                // egressd's epoch
	fail    map[string]error      // op → the error it answers with
	ph      string                // a placeholder secretd hands out instead of its own ("": its own)
}

type fakeLease struct{ inv, owner, cred, dest, placeholder string }

type fakeBundle struct {
	owner        string
	credentialed bool
	epoch        string
}

// startDaemons starts both fakes until the test ends.
func startDaemons(t *testing.T, j *journal, root string) *daemons {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "hk") // short: a socket path has ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &daemons{j: j, root: root, leases: map[string]fakeLease{}, bundles: map[string]fakeBundle{}, epoch: "epoch-1", fail: map[string]error{}}
	d.sdSock, d.stopSD = serveFake(t, filepath.Join(dir, "sd", "api.sock"), d.secretdOps()...)
	d.egSock, d.stopEG = serveFake(t, filepath.Join(dir, "eg", "api.sock"), d.egressdOps()...)
	return d
}

// serveFake serves ops on path until the test ends or stop is called.
func serveFake(t *testing.T, path string, ops ...rpc.Op) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l, err := sock.Listen(ctx, sock.Config{Path: path, Group: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := rpc.NewServer(rpc.Config{Daemon: "fake", Logger: slog.New(slog.DiscardHandler), Roles: rpc.Roles{"stager": {uint32(os.Geteuid())}}}, ops...)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(served) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); l.Close(); <-served }) }
	t.Cleanup(stop)
	return path, stop
}

// failOp makes op answer err from now on (nil: answer again).
func (d *daemons) failOp(op string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail[op] = err
}

// setEpoch is an egressd restart as far as epochs go (bundles are kept:
// the test decides what egressd still holds).
func (d *daemons) setEpoch(e string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.epoch = e
}

// stage puts a lease of inv, staged by an earlier process, in secretd.
func (d *daemons) stage(inv, owner, cred string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	d.leases[fmt.Sprintf("h%d", d.n)] = fakeLease{inv: inv, owner: owner, cred: cred, placeholder: fmt.Sprintf("PLACEHOLDER%d", d.n)}
}

// register puts a bundle of inv, registered by an earlier process, in
// egressd.
func (d *daemons) register(inv, owner string, credentialed bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bundles[inv] = fakeBundle{owner: owner, credentialed: credentialed, epoch: d.epoch}
}

// leaseCount is the number of inv's unconsumed leases.
func (d *daemons) leaseCount(inv string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, l := range d.leases {
		if l.inv == inv {
			n++
		}
	}
	return n
}

// hasBundle reports whether inv has a bundle.
func (d *daemons) hasBundle(inv string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.bundles[inv]
	return ok
}

// intentOf names the intent on disk for instance inv right now: its op,
// "none" (metadata without one) or "missing" (no readable metadata).
func (d *daemons) intentOf(inv string) string {
	md, err := store.Store{Root: d.root}.Load(inv)
	switch {
	case err != nil:
		return "missing"
	case md.Intent == nil:
		return "none"
	}
	return md.Intent.Op
}

// failed returns the error op is set to answer with.
func (d *daemons) failed(op string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fail[op]
}

func (d *daemons) secretdOps() []rpc.Op {
	return []rpc.Op{
		{Name: healthapi.Op, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			if err := d.failed(healthapi.Op); err != nil {
				return nil, err
			}
			return &healthapi.Response{Epoch: "0123456789abcdef", Status: "ok", Version: "fake"}, nil
		}},
		{Name: secretdapi.OpLeaseStage, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req secretdapi.LeaseStageRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			d.j.add("lease.stage %s %s intent=%s", req.Invocation, req.Credential, d.intentOf(req.Invocation))
			if err := d.failed(secretdapi.OpLeaseStage); err != nil {
				return nil, err
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			d.n++
			h := fmt.Sprintf("h%d", d.n)
			ph := fmt.Sprintf("PLACEHOLDER%d", d.n)
			if d.ph != "" {
				ph = d.ph
			}
			d.leases[h] = fakeLease{inv: req.Invocation, owner: req.Owner, cred: req.Credential, dest: req.Destination, placeholder: ph}
			return &secretdapi.LeaseStageResponse{ExpiresAt: 1, Handle: []byte(h), Placeholder: ph}, nil
		}},
		{Name: secretdapi.OpLeaseLookup, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req secretdapi.LeaseLookupRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			l, ok := d.leases[string(req.Handle)]
			if !ok {
				return nil, wire.Errorf("lease.unknown", "no such lease")
			}
			return &secretdapi.LeaseMeta{Credential: l.cred, Destination: l.dest, Invocation: l.inv, Owner: l.owner, Placeholder: l.placeholder}, nil
		}},
		{Name: secretdapi.OpLeaseRevoke, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req secretdapi.LeaseRevokeRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			d.j.add("lease.revoke %s", req.Invocation)
			if err := d.failed(secretdapi.OpLeaseRevoke); err != nil {
				return nil, err
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			n := 0
			for h, l := range d.leases {
				if l.inv == req.Invocation && (req.Owner == "" || l.owner == req.Owner) {
					delete(d.leases, h)
					n++
				}
			}
			return &secretdapi.LeaseRevokeResponse{Revoked: n}, nil
		}},
		{Name: secretdapi.OpLeaseList, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req secretdapi.LeaseListRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			if err := d.failed(secretdapi.OpLeaseList); err != nil {
				return nil, err
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			out := &secretdapi.LeaseListResponse{Leases: []secretdapi.LeaseMeta{}}
			for _, l := range d.leases {
				if (req.Owner == "" || l.owner == req.Owner) && (req.Invocation == "" || l.inv == req.Invocation) {
					out.Leases = append(out.Leases, secretdapi.LeaseMeta{Credential: l.cred, Invocation: l.inv, Owner: l.owner})
				}
			}
			sort.Slice(out.Leases, func(i, j int) bool { return out.Leases[i].Invocation < out.Leases[j].Invocation })
			return out, nil
		}},
	}
}

func (d *daemons) egressdOps() []rpc.Op {
	return []rpc.Op{
		{Name: egressdapi.OpEgressInfo, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			if err := d.failed(egressdapi.OpEgressInfo); err != nil {
				return nil, err
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			return &egressdapi.InfoResponse{CABundlePath: "/nonexistent/egressd-ca.pem", Epoch: d.epoch, ProxyAddress: "127.0.0.1:4750"}, nil
		}},
		{Name: egressdapi.OpBundleRegister, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req egressdapi.BundleRegisterRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			d.j.add("bundle.register %s intent=%s", req.Invocation, d.intentOf(req.Invocation))
			if err := d.failed(egressdapi.OpBundleRegister); err != nil {
				return nil, err
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if _, ok := d.bundles[req.Invocation]; ok {
				return nil, wire.Errorf(egressdapi.CodeBundleExists, "the invocation has a bundle")
			}
			for _, h := range req.Handles {
				if l, ok := d.leases[string(h)]; !ok || l.inv != req.Invocation {
					return nil, wire.Errorf(egressdapi.CodeBundleConsumeFailed, "no such lease")
				}
			}
			for _, h := range req.Handles {
				delete(d.leases, string(h)) // consumed: egressd holds the values now
			}
			d.bundles[req.Invocation] = fakeBundle{owner: req.Owner, credentialed: len(req.Handles) > 0, epoch: d.epoch}
			return &egressdapi.BundleRegisterResponse{Epoch: d.epoch}, nil
		}},
		{Name: egressdapi.OpBundleDrop, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req egressdapi.BundleDropRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			d.j.add("bundle.drop %s", req.Invocation)
			if err := d.failed(egressdapi.OpBundleDrop); err != nil {
				return nil, err
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			b, ok := d.bundles[req.Invocation]
			switch {
			case !ok:
				return nil, wire.Errorf(egressdapi.CodeBundleUnknown, "no bundle")
			case req.Owner != "" && b.owner != req.Owner:
				return nil, wire.Errorf(egressdapi.CodeBundleOwnerMismatch, "another owner's bundle")
			}
			delete(d.bundles, req.Invocation)
			return nil, nil
		}},
		{Name: egressdapi.OpBundleList, Handler: func(ctx context.Context, call *rpc.Call) (any, error) {
			var req egressdapi.BundleListRequest
			if err := call.Decode(&req); err != nil {
				return nil, err
			}
			if err := d.failed(egressdapi.OpBundleList); err != nil {
				return nil, err
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			out := &egressdapi.BundleListResponse{Bundles: []egressdapi.BundleInfo{}}
			for inv, b := range d.bundles {
				if (req.Owner == "" || b.owner == req.Owner) && (req.Invocation == "" || inv == req.Invocation) {
					out.Bundles = append(out.Bundles, egressdapi.BundleInfo{Credentialed: b.credentialed, Epoch: b.epoch, Invocation: inv, Owner: b.owner})
				}
			}
			sort.Slice(out.Bundles, func(i, j int) bool { return out.Bundles[i].Invocation < out.Bundles[j].Invocation })
			return out, nil
		}},
	}
}
