//go:build linux

package manager

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/audit"

	"hostkit.dev/cmd/supervisord/internal/egress"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// testOwner is the owner id the manager under test stages and registers
// under.
const testOwner = "mgrtest-owner"

// githubCred is a credential a request asks for; the fake secretd stages
// any name.
var githubCred = api.CredentialSpec{Credential: "github", Destination: "https://api.github.com", Env: "GITHUB_TOKEN"}

// harness is one manager under test: real state and instance
// directories under t.TempDir(), a real audit log, a fake holder side,
// and (unless opts.noEgress) its real egress client talking to fake
// secretd and egressd daemons.
type harness struct {
	m     *Manager
	cfg   Config
	h     *fakeHolders
	d     *daemons // nil: no egress configured
	j     *journal
	work  string // an existing working directory for requests
	audit string // the audit log's active file
	root  bool
}

// opts are what a harness's manager differs in.
type opts struct {
	noEgress       bool // Config.Egress is nil
	root           bool // agents get their own uid (as when supervisord is root)
	uidMin, uidMax int  // the agent uid range (0, 0: 60000-60099)
}

func newHarness(t *testing.T, o opts) *harness {
	t.Helper()
	dir := t.TempDir()
	alog, err := audit.Open(audit.Options{Dir: filepath.Join(dir, "log"), Daemon: "supervisord", Fsync: audit.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alog.Close() })
	x := &harness{j: &journal{}, work: filepath.Join(dir, "work"), audit: filepath.Join(dir, "log", "audit.jsonl"), root: o.root}
	if err := os.Mkdir(x.work, 0o700); err != nil {
		t.Fatal(err)
	}
	if o.uidMin == 0 {
		o.uidMin, o.uidMax = 60000, 60099
	}
	log := slog.New(slog.DiscardHandler)
	x.cfg = Config{HostRuntimeEnabled: true, StateDir: filepath.Join(dir, "state"), HolderDir: filepath.Join(dir, "h"),
		DefaultWorkingDir: x.work, UIDMin: o.uidMin, UIDMax: o.uidMax, Logger: log, DefaultNetwork: api.NetworkHost, Audit: alog}
	instances := filepath.Join(x.cfg.StateDir, "instances")
	if !o.noEgress {
		x.d = startDaemons(t, x.j, instances)
		eg := egress.New(egress.Config{SecretdSocket: x.d.sdSock, EgressdSocket: x.d.egSock, Required: true, Logger: log,
			Owner: testOwner, Timeout: 2 * time.Second})
		t.Cleanup(eg.Close)
		x.cfg.Egress = eg
	}
	x.h = newFakeHolders(x.j, instances)
	x.m = x.restart(t)
	return x
}

// restart returns a new manager over the same directories, daemons and
// holders: supervisord started again, before its Reconcile.
func (x *harness) restart(t *testing.T) *Manager {
	t.Helper()
	m, err := New(x.cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever user runs the test: the case decides.
	m.root, m.nsErr = x.root, nil
	m.h = x.h
	return m
}

// req is a host provision request of instance id running /bin/true.
func (x *harness) req(id string, start bool, creds ...api.CredentialSpec) *api.ProvisionRequest {
	return &api.ProvisionRequest{InstanceID: id, Command: []string{"/bin/true"}, Start: start, WorkingDir: x.work, Credentials: creds}
}

// exists reports whether instance id's directory exists.
func (x *harness) exists(t *testing.T, id string) bool {
	t.Helper()
	_, err := os.Stat(x.m.st.Dir(id))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// load reads instance id's metadata from disk.
func (x *harness) load(t *testing.T, id string) *store.Metadata {
	t.Helper()
	md, err := x.m.st.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// uidHeld reports whether the manager holds an agent uid for id.
func (x *harness) uidHeld(id string) bool {
	x.m.uidMu.Lock()
	defer x.m.uidMu.Unlock()
	_, ok := x.m.uids[id]
	return ok
}

// auditRec is the part of an audit record the tests read.
type auditRec struct {
	Op      string         `json:"op"`
	Outcome string         `json:"outcome"`
	Code    string         `json:"code"`
	Fields  map[string]any `json:"fields"`
}

// audits returns the audit records of op written so far.
func (x *harness) audits(t *testing.T, op string) []auditRec {
	t.Helper()
	f, err := os.Open(x.audit)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditRec
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r auditRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Op == op {
			out = append(out, r)
		}
	}
	return out
}

// testID is the nth instance id of a test.
func testID(n int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n) }

// writeJSON writes v as file name of instance id, making the directory.
func (x *harness) writeJSON(t *testing.T, id, name string, v any) {
	t.Helper()
	if err := os.MkdirAll(x.m.st.Dir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := store.WriteJSONAtomic(x.m.st.Path(id, name), v); err != nil {
		t.Fatal(err)
	}
}
