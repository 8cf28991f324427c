//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/buildtest"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/fault"
	"hostkit.dev/cmd/supervisord/internal/store"
)

// Crash tests (docs/supervisord.md, "Restart"): supervisord is killed
// with SIGKILL in the middle of provision, stop and destroy, restarted,
// and what secretd, egressd, the instances directory and the process
// table hold afterwards is checked for real. TestMain made this process
// a child subreaper, so the holders of a killed supervisord are
// reparented to it and reaped.

// The environment names the faultinject build reads (internal/fault).
const (
	envFaultPoint = "SUPERVISORD_FAULT_POINT"
	envFaultDir   = "SUPERVISORD_FAULT_DIR"
)

// faultBin is supervisord built with -tags faultinject (once for all
// test processes: buildtest), linked beside binary once.
var faultBin = sync.OnceValues(func() (string, error) {
	ctx := context.Background()
	built, err := buildtest.Binary(ctx, ".", "-tags", "faultinject")
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(binary), "supervisord-faultinject")
	return p, buildtest.Link(built, p)
})

func buildFaultBinary(t *testing.T) string {
	t.Helper()
	p, err := faultBin()
	if err != nil {
		t.Fatalf("build -tags faultinject: %v", err)
	}
	return p
}

// TestReleaseBinaryHasNoPausePoints guards against a pause point in a
// release build: the binary built without the tag has no symbol of the
// fault package's implementation and not the variable it reads, while
// the faultinject build has both (so the check can fail).
func TestReleaseBinaryHasNoPausePoints(t *testing.T) {
	is := is.New(t)
	fb := buildFaultBinary(t)
	scan := func(bin string) (syms int, env bool) {
		out, err := exec.Command("go", "tool", "nm", bin).Output()
		is.NoErr(err)
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, "hostkit.dev/cmd/supervisord/internal/fault.") {
				syms++
			}
		}
		b, err := os.ReadFile(bin)
		is.NoErr(err)
		return syms, bytes.Contains(b, []byte(envFaultPoint))
	}
	syms, env := scan(binary)
	is.Equal(syms, 0) // release: no fault symbol
	is.True(!env)     // release: never reads the variable
	syms, env = scan(fb)
	is.True(syms > 0) // faultinject: the pause points are there
	is.True(env)
}

// crashStack is the egress stack with a second credential and what the
// crash checks need.
type crashStack struct {
	*egressStack
	owner string
	marks string // the fault marker directory
}

func newCrashStack(t *testing.T) *crashStack { return newCrashStackIn(t, "/tmp") }

// newCrashStackIn is newCrashStack with the root made under base.
func newCrashStackIn(t *testing.T, base string) *crashStack {
	t.Helper()
	s := &crashStack{egressStack: newEgressStackIn(t, base, "-holder-pool", "2")}
	_, err := s.sdc.CredentialPut(context.Background(), &secretdapi.CredentialPutRequest{Name: "api2", Value: []byte(egressCanary + "-2"),
		Destinations: []string{s.origin}, Targets: []secretdapi.TargetSpec{{Target: "query:key"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(s.root, "state", "supervisord", store.FileOwner))
	if err != nil {
		t.Fatal(err)
	}
	s.owner = strings.TrimSpace(string(b))
	s.marks = t.TempDir()
	return s
}

// credReq is a started, credentialed provision (two credentials).
func credReq() *api.ProvisionRequest {
	return &api.ProvisionRequest{InstanceID: api.NewID(), Command: []string{"sleep", "1000"}, Start: true, WorkingDir: "/tmp",
		StopTimeoutMS: 1000, Credentials: []api.CredentialSpec{{Credential: "api", Env: "API_TOKEN"}, {Credential: "api2", Env: "API2_KEY"}}}
}

// bootAt boots e's supervisord from the faultinject build, to stop at
// point (marker files in marks), or to run through when point is "".
func bootAt(t *testing.T, e *env, marks, point string) {
	t.Helper()
	e.bin = buildFaultBinary(t)
	e.envs = nil
	if point != "" {
		e.envs = []string{envFaultPoint + "=" + point, envFaultDir + "=" + marks}
	}
	e.boot()
}

// waitMark waits until supervisord reached point (its marker file).
func waitMark(t *testing.T, s *env, marks, point string) {
	t.Helper()
	name, _, _ := strings.Cut(point, "#")
	path := filepath.Join(marks, name)
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			os.Remove(path)
			return
		}
		if time.Now().After(end) {
			t.Fatalf("supervisord never reached pause point %s: %s", point, s.cmd.Stderr)
		}
	}
}

// crashAt kills e's supervisord (faultinject build) at pause point while
// it carries out op (provision of req; stop or destroy of req's instance,
// which is provisioned first), checks that op was not acknowledged,
// restarts supervisord and waits (up to 30 s: stop and destroy intents
// are finished in the background) until req's instance is want: gone,
// or a state.
func crashAt(t *testing.T, e *env, marks, op, point, want string, req *api.ProvisionRequest) {
	t.Helper()
	ctx := context.Background()
	id := req.InstanceID
	if op != "provision" { // an acknowledged instance to stop or destroy
		if _, err := e.c.Provision(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	e.kill()
	bootAt(t, e, marks, point)
	done := make(chan error, 1)
	go func() {
		rc := rpc.NewClient(e.sock(), 60*time.Second)
		defer rc.Close()
		c := api.NewClient(rc)
		var err error
		switch op {
		case "provision":
			_, err = c.Provision(ctx, req)
		case "stop":
			_, err = c.Stop(ctx, id)
		default:
			err = c.Destroy(ctx, id)
		}
		done <- err
	}()
	waitMark(t, e, marks, point)
	e.kill()
	if err := <-done; err == nil {
		t.Fatalf("%s answered although supervisord was killed at %s", op, point)
	}
	bootAt(t, e, marks, "")
	var got string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		st, err := e.c.Status(ctx, id)
		if got = "gone"; err == nil {
			got = st.State
		} else if wire.CodeOf(err) != api.CodeInstanceNotFound {
			got = wire.CodeOf(err)
		}
		if got == want {
			return
		}
	}
	t.Fatalf("after restart: %s, want %s\nsupervisord: %s", got, want, e.cmd.Stderr)
}

// leftovers lists what violates the crash invariants now: a directory
// under the instance root that is no instance; a lease at secretd (a
// finished provision consumed its own, an undone one revoked them); a
// bundle at egressd that no live instance of this supervisord owns, or a
// live credentialed instance without its bundle; an acknowledged
// instance (id → agent pid) that is not running with its pid; a process
// of an instance that is gone or ended; a holder that holds no live
// instance and is not an idle one of the running supervisord.
func (s *crashStack) leftovers(acked map[string]int64) []string {
	ctx := context.Background()
	var bad []string
	l, err := s.c.List(ctx)
	if err != nil {
		return []string{"instance.list: " + err.Error()}
	}
	inst := map[string]api.Instance{}
	for _, in := range l.Instances {
		inst[in.InstanceID] = in
	}
	ents, _ := os.ReadDir(filepath.Join(s.root, "state", "supervisord", "instances"))
	for _, e := range ents {
		if _, ok := inst[e.Name()]; !ok {
			bad = append(bad, "orphan directory "+e.Name())
		}
	}
	leases, err := s.sdc.LeaseList(ctx, "")
	if err != nil {
		bad = append(bad, "lease.list: "+err.Error())
	} else {
		for _, le := range leases.Leases {
			bad = append(bad, "lease nobody owns: "+le.Invocation+" owner "+le.Owner)
		}
	}
	bl, err := s.egc.BundleList(ctx, "", "")
	if err != nil {
		bad = append(bad, "bundle.list: "+err.Error())
	} else {
		held := map[string]bool{}
		for _, b := range bl.Bundles {
			held[b.Invocation] = true
			if in, ok := inst[b.Invocation]; !ok || in.State != api.StateRunning || b.Owner != s.owner {
				bad = append(bad, fmt.Sprintf("bundle nobody owns: %s owner %s (instance %q)", b.Invocation, b.Owner, inst[b.Invocation].State))
			}
		}
		for id, in := range inst {
			if in.State == api.StateRunning && !held[id] {
				bad = append(bad, "running instance without its bundle: "+id)
			}
		}
	}
	for id, pid := range acked {
		if in, ok := inst[id]; !ok || in.State != api.StateRunning || in.PID != pid {
			bad = append(bad, fmt.Sprintf("acknowledged instance %s not intact: %+v", id, inst[id]))
		}
	}
	for pid, id := range s.agentProcs() {
		if in, ok := inst[id]; !ok || in.State != api.StateRunning {
			bad = append(bad, fmt.Sprintf("orphan process %d of instance %s (%q)", pid, id, in.State))
		}
	}
	live := map[string]bool{}
	for id, in := range inst {
		if in.State == api.StateRunning {
			live[api.Hex16(id)+".sock.lock"] = true
		}
	}
	for pid, locks := range s.holders() {
		switch {
		case len(locks) == 0 && ppid(pid) == s.cmd.Process.Pid:
		case len(locks) == 1 && live[locks[0]]:
		default:
			bad = append(bad, fmt.Sprintf("orphan holder %d (locks %v, parent %d)", pid, locks, ppid(pid)))
		}
	}
	sort.Strings(bad)
	return bad
}

// waitClean waits (up to 20 s: stop and destroy intents finish in the
// background, old idle holders exit on their own) until nothing violates
// the invariants.
func (s *crashStack) waitClean(t *testing.T, acked map[string]int64) {
	t.Helper()
	var bad []string
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if bad = s.leftovers(acked); len(bad) == 0 {
			return
		}
	}
	t.Fatalf("after restart:\n%s\nsupervisord: %s", strings.Join(bad, "\n"), s.cmd.Stderr)
}

// agentProcs maps every live process of an instance under this root to
// its instance id (its environment names the instance and this root's
// CA bundle; other stacks' agents are not this one's).
func (s *crashStack) agentProcs() map[int]string {
	out := map[int]string{}
	mark := []byte(filepath.Join(s.root, "run", "public"))
	for _, pid := range pids() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil || !bytes.Contains(b, mark) || !alive(pid) {
			continue
		}
		for _, kv := range bytes.Split(b, []byte{0}) {
			if id, ok := bytes.CutPrefix(kv, []byte("HOSTKIT_INSTANCE_ID=")); ok {
				out[pid] = string(id)
			}
		}
	}
	return out
}

// holders maps every live holder under this root to the instance locks
// it holds open (none for an idle one).
func (s *crashStack) holders() map[int][]string {
	out := map[int][]string{}
	hdir := filepath.Join(s.root, "run", "supervisord", "h")
	for _, pid := range pids() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !alive(pid) || !bytes.Contains(b, []byte("\x00holder\x00-hdir\x00"+hdir+"\x00")) {
			continue
		}
		locks := []string{}
		fds, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		for _, fd := range fds {
			if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name()); err == nil && filepath.Dir(l) == hdir && strings.HasSuffix(l, ".sock.lock") {
				locks = append(locks, filepath.Base(l))
			}
		}
		out[pid] = locks
	}
	return out
}

// pids lists this test process's descendants: every process of the
// stacks it started, also the orphans of a killed supervisord, since this
// process is a child subreaper (TestMain). One stat read per process
// keeps a check cheap on a machine with thousands of other processes.
func pids() []int {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if pp := ppid(pid); pp > 0 {
				children[pp] = append(children[pp], pid)
			}
		}
	}
	var out []int
	for queue := children[os.Getpid()]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, children[queue[0]]...)
	}
	return out
}

func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+2:]))
	n, _ := strconv.Atoi(f[1])
	return n
}

// destroyAllChecked destroys every instance and checks that nothing is
// left.
func (s *crashStack) destroyAllChecked(t *testing.T) {
	t.Helper()
	s.destroyAllNow(t)
	s.waitClean(t, nil)
}

// destroyAllNow destroys every instance, all at once.
func (s *crashStack) destroyAllNow(t *testing.T) {
	t.Helper()
	l, err := s.c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, in := range l.Instances {
		wg.Go(func() {
			rc := rpc.NewClient(s.sock(), 60*time.Second)
			defer rc.Close()
			c := api.NewClient(rc)
			if err := c.Destroy(context.Background(), in.InstanceID); err != nil {
				t.Errorf("destroy %s: %v", in.InstanceID, err)
			}
		})
	}
	wg.Wait()
}

// TestCrashAtEveryStep kills supervisord at every step boundary of a
// credentialed provision, of stop and of destroy (pause points of the
// faultinject build), restarts it and checks for real: no orphan
// directory, no lease and no bundle that no instance owns, no orphan
// process or holder; a provision whose agent had not started is undone
// (its id provisions again), one whose agent runs is adopted; a stop or
// destroy is finished.
func TestCrashAtEveryStep(t *testing.T) {
	s := newCrashStack(t)
	ctx := context.Background()
	for _, tc := range []struct {
		op, point, want string // want: gone, running or stopped
	}{
		{"provision", fault.ProvisionIntent, "gone"},
		{"provision", fault.ProvisionLease + "#1", "gone"},
		{"provision", fault.ProvisionLease + "#2", "gone"},
		{"provision", fault.ProvisionBundle, "gone"},
		{"provision", fault.ProvisionRecord, "gone"},
		{"provision", fault.ProvisionAssigned, "running"},
		{"provision", fault.ProvisionRunning, "running"},
		{"stop", fault.StopIntent, "stopped"},
		{"stop", fault.StopStopped, "stopped"},
		{"stop", fault.StopDropped, "stopped"},
		{"destroy", fault.DestroyIntent, "gone"},
		{"destroy", fault.DestroyReleased, "gone"},
		{"destroy", fault.DestroyTrashed, "gone"},
	} {
		t.Run(tc.op+"@"+tc.point, func(t *testing.T) {
			is := is.New(t)
			req := credReq()
			id := req.InstanceID
			crashAt(t, s.env, s.marks, tc.op, tc.point, tc.want, req)
			s.waitClean(t, nil)
			if tc.op == "provision" && tc.want == "gone" {
				b, err := os.ReadFile(filepath.Join(s.root, "log", "supervisord", "audit.jsonl"))
				is.NoErr(err)
				audited := false
				for _, l := range bytes.Split(b, []byte("\n")) {
					audited = audited || bytes.Contains(l, []byte(`"instance_id":"`+id+`"`)) && bytes.Contains(l, []byte(`"reason":"provision_undone"`))
				}
				is.True(audited) // the undo is audited
				is.True(!bytes.Contains(b, []byte(egressCanary)))
				_, err = s.c.Provision(ctx, req) // the id is free again
				is.NoErr(err)
			}
			s.destroyAllChecked(t)
		})
	}
}
