//go:build linux

package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/helperapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/buildtest"
	"hostkit.dev/lib/rpc"
	"hostkit.dev/lib/wire"

	"hostkit.dev/cmd/supervisord/internal/container"
)

// The containerization-helper binary and a busybox image, built once
// (next to supervisord, so the helper's default allowlist — hostctl and
// supervisord beside its own binary — admits supervisord).
var (
	fixtureOnce          sync.Once
	helperBin, fixErr    string
	imgLayout, imgDigest string
)

// fixtures builds the helper next to supervisord and the busybox image.
func fixtures(t *testing.T) {
	t.Helper()
	fixtureOnce.Do(func() {
		dir := filepath.Dir(binary)
		helperBin = filepath.Join(dir, "containerization-helper")
		// The helper's own module directory, inside the workspace or not.
		if err := buildtest.Install(context.Background(), dir, "../containerization-helper"); err != nil {
			fixErr = "build containerization-helper: " + err.Error()
			return
		}
		imgLayout, imgDigest, fixErr = buildImage(dir)
	})
	if fixErr != "" {
		t.Fatal(fixErr)
	}
}

// buildImage makes a one-layer OCI image layout with Debian's
// busybox-static using umoci (as hostctl's container test does) and
// returns the layout and its manifest digest. Test-only: supervisord
// reaches umoci only through the helper.
func buildImage(dir string) (layout, digest, fail string) {
	layout = filepath.Join(dir, "img")
	for _, args := range [][]string{{"init", "--layout", layout}, {"new", "--image", layout + ":t"},
		{"unpack", "--image", layout + ":t", filepath.Join(dir, "b")}} {
		if out, err := exec.Command("umoci", args...).CombinedOutput(); err != nil {
			return "", "", "umoci " + strings.Join(args, " ") + ": " + err.Error() + "\n" + string(out)
		}
	}
	bin := filepath.Join(dir, "b", "rootfs", "bin")
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return "", "", "busybox-static is required (scripts/setup installs it): " + err.Error()
	}
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", "", err.Error()
	}
	if err := os.WriteFile(filepath.Join(bin, "busybox"), bb, 0o755); err != nil {
		return "", "", err.Error()
	}
	for _, l := range []string{"sh", "echo", "sleep", "cat", "env"} {
		if err := os.Symlink("busybox", filepath.Join(bin, l)); err != nil {
			return "", "", err.Error()
		}
	}
	if out, err := exec.Command("umoci", "repack", "--image", layout+":t", filepath.Join(dir, "b")).CombinedOutput(); err != nil {
		return "", "", "umoci repack: " + err.Error() + "\n" + string(out)
	}
	var idx struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil || json.Unmarshal(b, &idx) != nil || len(idx.Manifests) != 1 {
		return "", "", "index.json: " + string(b)
	}
	return layout, idx.Manifests[0].Digest, ""
}

// helperProc is a containerization-helper started for a test under the
// same root as supervisord.
type helperProc struct {
	cmd    *exec.Cmd
	stderr *lockedBuf
	done   chan struct{}
}

// startHelper starts the helper (no idle exit) under e's root and waits
// for its socket. At clean-up every instance is destroyed while the
// helper still runs, then the helper is killed and whatever container is
// left in its runtime root is deleted with runc (a failed test's).
func startHelper(t *testing.T, e *env, args ...string) *helperProc {
	t.Helper()
	fixtures(t)
	h := &helperProc{stderr: &lockedBuf{}, done: make(chan struct{})}
	h.cmd = exec.Command(helperBin, append([]string{"-root", e.root, "-idle-timeout", "0"}, args...)...)
	h.cmd.Stderr = h.stderr
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	daemons.Store(h.cmd.Process.Pid, true)
	go func() { h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		e.destroyAll()
		h.kill()
		for _, id := range runcList(t, e.root) {
			exec.Command("runc", "--root", runcRoot(e.root), "delete", "-f", id).Run()
		}
	})
	sock := filepath.Join(e.root, "run", "helper", "api.sock")
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return h
		}
		select {
		case <-h.done:
			t.Fatalf("the helper exited: %s", h.stderr)
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("the helper did not listen: %s", h.stderr)
		}
	}
}

func (h *helperProc) kill() {
	h.cmd.Process.Kill()
	<-h.done
}

// runcRoot is the helper's private runtime root under root.
func runcRoot(root string) string { return filepath.Join(root, "state", "helper", "runtime") }

// runcList lists the container ids in the helper's runtime root, asking
// runc itself (not the helper).
func runcList(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("runc", "--root", runcRoot(root), "list", "-q").Output()
	if err != nil {
		t.Fatalf("runc list: %v", err)
	}
	return strings.Fields(string(out))
}

// ctrReq is a started container provision request for the test image.
func ctrReq(cmd ...string) api.ProvisionRequest {
	return api.ProvisionRequest{Runtime: api.RuntimeContainer, Image: &api.ImageRef{Layout: imgLayout, ManifestDigest: imgDigest},
		Command: cmd, Start: true, StopTimeoutMS: 1000, Env: map[string]string{"GREETING": "hello-ctr"}}
}

// inContainer asserts that instance id's processes exist and every one
// runs in another pid namespace than this test, as a descendant of the
// helper: never as a host process of supervisord's.
func inContainer(t *testing.T, id string, helperPid int) {
	t.Helper()
	procs := treeOf(id)
	if len(procs) == 0 {
		t.Fatalf("instance %s: no process", id)
	}
	self, _ := os.Readlink("/proc/self/ns/pid")
	for _, pid := range procs {
		ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
		if ns == self {
			t.Fatalf("pid %d of %s runs in the host's pid namespace", pid, id)
		}
		if !descends(pid, helperPid) {
			t.Fatalf("pid %d of %s is not a descendant of the helper", pid, id)
		}
	}
}

// descends reports whether pid's ancestry reaches anc.
func descends(pid, anc int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		if pid == anc {
			return true
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		pid, _ = strconv.Atoi(f[1])
	}
	return false
}

// TestContainerLifecycle: a runtime container instance (without
// -host-runtime-enabled) runs in a container made by the helper, its logs
// show the container's output, stop leaves it stopped with nothing left
// in runc (its output kept), and destroy removes it.
func TestContainerLifecycle(t *testing.T) {
	is := is.New(t)
	e := start(t)
	h := startHelper(t, e)
	ctx := context.Background()
	t0 := time.Now()
	in, err := e.c.Provision(ctx, ptr(ctrReq("/bin/sh", "-c", "echo $GREETING $HOSTKIT_INSTANCE_ID; exec sleep 1000")))
	is.NoErr(err)
	t.Logf("provision→running: %v", time.Since(t0))
	is.Equal(in.State, api.StateRunning)
	is.Equal(in.Runtime, api.RuntimeContainer)
	is.Equal(in.Network, api.NetworkNone)
	is.True(strings.HasPrefix(in.ContainerID, "hk-"))
	is.True(in.PID > 0)
	is.Equal(in.Image.ManifestDigest, imgDigest)
	is.Equal(runcList(t, e.root), []string{in.ContainerID})
	e.waitLog(in.InstanceID, "hello-ctr "+in.InstanceID, 5*time.Second)
	inContainer(t, in.InstanceID, h.cmd.Process.Pid)
	st, err := e.c.Status(ctx, in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateRunning)
	is.Equal(st.ContainerID, in.ContainerID)

	t0 = time.Now()
	out, err := e.c.Stop(ctx, in.InstanceID)
	is.NoErr(err)
	// The container's init is pid 1 of its namespace and has no SIGTERM
	// handler: the stop takes the stop timeout (1 s), then SIGKILL.
	t.Logf("stop (stop timeout 1 s): %v", time.Since(t0))
	is.Equal(out.State, api.StateStopped)
	is.Equal(len(runcList(t, e.root)), 0)
	is.Equal(len(treeOf(in.InstanceID)), 0)
	st, err = e.c.Status(ctx, in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateStopped)
	e.waitLog(in.InstanceID, "hello-ctr", time.Second) // kept by stop
	out, err = e.c.Stop(ctx, in.InstanceID)            // again: nothing to do
	is.NoErr(err)
	is.Equal(out.State, api.StateStopped)

	is.NoErr(e.c.Destroy(ctx, in.InstanceID))
	_, err = e.c.Status(ctx, in.InstanceID)
	code(t, err, api.CodeInstanceNotFound)
	_, err = os.Stat(filepath.Join(e.root, "state", "supervisord", "instances", in.InstanceID))
	is.True(os.IsNotExist(err))
}

func ptr[T any](v T) *T { return &v }

// TestContainerNeverOnHost: without a reachable helper, or with one that
// refuses supervisord's executable, a container provision fails closed
// with runtime.unavailable carrying the reason; no process of the
// instance exists and no instance is left.
func TestContainerNeverOnHost(t *testing.T) {
	fixtures(t)
	e := start(t, "-host-runtime-enabled", "yes")
	denied := start(t, "-host-runtime-enabled", "yes")
	startHelper(t, denied, "-allow-exe", "/bin/busybox") // supervisord is not on its allowlist
	off := start(t, "-host-runtime-enabled", "yes", "-helper-socket", "none")
	for _, tc := range []struct {
		name string
		e    *env
		why  string
	}{
		{"no helper running", e, wire.CodeUnavailable},
		{"helper refuses the peer", denied, wire.CodePeerDenied},
		{"helper not configured", off, "-helper-socket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			req := ctrReq("/bin/sh", "-c", "exec sleep 1000")
			req.InstanceID = api.NewID()
			_, err := tc.e.c.Provision(context.Background(), &req)
			code(t, err, api.CodeRuntimeUnavailable)
			is.True(strings.Contains(wire.AsError(err).Msg, tc.why))
			is.Equal(len(treeOf(req.InstanceID)), 0) // nothing ran, on the host or elsewhere
			_, err = os.Stat(filepath.Join(tc.e.root, "run", "supervisord", "h", api.Hex16(req.InstanceID)+".sock"))
			is.True(os.IsNotExist(err)) // no holder
			_, err = tc.e.c.Status(context.Background(), req.InstanceID)
			code(t, err, api.CodeInstanceNotFound)
		})
	}
}

// TestContainerProvisionIdempotent: the same request answers the same
// container; a different one is instance.conflict; start false leaves
// the container created; what a container cannot have is instance.invalid.
func TestContainerProvisionIdempotent(t *testing.T) {
	is := is.New(t)
	e := start(t)
	startHelper(t, e)
	ctx := context.Background()
	req := ctrReq("/bin/sh", "-c", "exec sleep 1000")
	req.InstanceID = api.NewID()
	a, err := e.c.Provision(ctx, ptr(req))
	is.NoErr(err)
	b, err := e.c.Provision(ctx, ptr(req))
	is.NoErr(err)
	is.Equal(b.ContainerID, a.ContainerID)
	is.Equal(b.State, api.StateRunning)
	is.Equal(len(runcList(t, e.root)), 1)
	other := req
	other.Command = []string{"/bin/sh", "-c", "exec sleep 999"}
	_, err = e.c.Provision(ctx, &other)
	code(t, err, api.CodeInstanceConflict)

	created := ctrReq("/bin/sh", "-c", "exec sleep 1000")
	created.Start = false
	c, err := e.c.Provision(ctx, &created)
	is.NoErr(err)
	is.Equal(c.State, api.StateCreated)
	is.True(c.ContainerID != "")

	_, _, err = e.c.Attach(ctx, &api.AttachRequest{InstanceID: a.InstanceID})
	code(t, err, api.CodeInstanceInvalid)
	is.True(strings.Contains(wire.AsError(err).Msg, "no terminal"))
	code(t, e.c.Signal(ctx, a.InstanceID, "TERM"), api.CodeInstanceInvalid)
	_, err = e.c.FollowLogs(ctx, &api.LogsRequest{InstanceID: a.InstanceID})
	code(t, err, api.CodeInstanceInvalid)
	for _, tc := range []struct {
		name string
		edit func(*api.ProvisionRequest)
	}{
		{"pty", func(r *api.ProvisionRequest) { r.PTY = true }},
		{"tmux", func(r *api.ProvisionRequest) { r.SessionBackend = api.BackendTmux }},
		{"working dir", func(r *api.ProvisionRequest) { r.WorkingDir = "/tmp" }},
		{"credentials", func(r *api.ProvisionRequest) { r.Credentials = []api.CredentialSpec{{Credential: "c", Env: "T"}} }},
		{"network", func(r *api.ProvisionRequest) { r.Network = &api.Network{Mode: api.NetworkIsolated} }},
		{"restart", func(r *api.ProvisionRequest) { r.Restart = api.RestartOnFailure }},
		{"no image", func(r *api.ProvisionRequest) { r.Image = nil }},
		{"relative layout", func(r *api.ProvisionRequest) { r.Image = &api.ImageRef{Layout: "img", ManifestDigest: imgDigest} }},
		{"unknown manifest", func(r *api.ProvisionRequest) {
			r.Image = &api.ImageRef{Layout: imgLayout, ManifestDigest: "sha256:" + strings.Repeat("0", 64)}
		}},
		{"image on host runtime", func(r *api.ProvisionRequest) { r.Runtime = api.RuntimeHost; r.WorkingDir = "/tmp" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ctrReq("/bin/sh", "-c", "exec sleep 1000")
			r.InstanceID = api.NewID()
			tc.edit(&r)
			_, err := e.c.Provision(ctx, &r)
			code(t, err, api.CodeInstanceInvalid)
			is.New(t).Equal(len(treeOf(r.InstanceID)), 0)
		})
	}
	is.Equal(len(runcList(t, e.root)), 2) // nothing more was created
}

// TestContainerReadoptedAfterKill9: after kill -9 of supervisord, a
// running container instance is re-adopted under a raised fence: status,
// a repeated provision, logs, stop and destroy all work.
func TestContainerReadoptedAfterKill9(t *testing.T) {
	is := is.New(t)
	e := start(t)
	h := startHelper(t, e)
	ctx := context.Background()
	req := ctrReq("/bin/sh", "-c", "echo $GREETING; exec sleep 1000")
	req.InstanceID = api.NewID()
	in, err := e.c.Provision(ctx, ptr(req))
	is.NoErr(err)
	e.kill()
	e.boot()
	dir := filepath.Join(e.root, "state", "supervisord", "instances", in.InstanceID)
	rec, err := container.LoadRecord(dir)
	is.NoErr(err)
	is.Equal(rec.Fence, uint64(2))
	st, err := e.c.Status(ctx, in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateRunning)
	is.Equal(st.ContainerID, in.ContainerID)
	again, err := e.c.Provision(ctx, ptr(req))
	is.NoErr(err)
	is.Equal(again.ContainerID, in.ContainerID)
	e.waitLog(in.InstanceID, "hello-ctr", 5*time.Second)
	inContainer(t, in.InstanceID, h.cmd.Process.Pid)
	out, err := e.c.Stop(ctx, in.InstanceID)
	is.NoErr(err)
	is.Equal(out.State, api.StateStopped)
	is.Equal(len(runcList(t, e.root)), 0)
	is.NoErr(e.c.Destroy(ctx, in.InstanceID))
	is.Equal(len(treeOf(in.InstanceID)), 0)
}

// TestContainerPendingMutationReplayed: supervisord is killed after the
// helper carried out a mutation but before its answer was recorded (the
// mutation is pending in container.json). The next supervisord replays it
// with the same idempotency key and body, gets the helper's answer and
// records the container as started; stop then works.
func TestContainerPendingMutationReplayed(t *testing.T) {
	is := is.New(t)
	e := start(t)
	self, err := os.Executable()
	is.NoErr(err)
	startHelper(t, e, "-allow-exe", self, "-allow-exe", binary) // this test plays supervisord's part
	ctx := context.Background()
	req := ctrReq("/bin/sh", "-c", "echo $GREETING; exec sleep 1000")
	req.Start = false
	in, err := e.c.Provision(ctx, &req)
	is.NoErr(err)
	is.Equal(in.State, api.StateCreated)
	e.kill()

	// What supervisord does for a start, up to the crash: plan, save the
	// pending mutation, send it; the answer is lost.
	dir := filepath.Join(e.root, "state", "supervisord", "instances", in.InstanceID)
	rec, err := container.LoadRecord(dir)
	is.NoErr(err)
	hc := helperapi.NewClient(rpc.NewClient(filepath.Join(e.root, "run", "helper", "api.sock"), 30*time.Second))
	defer hc.RPC().Close()
	neg, err := hc.Negotiate(ctx, nil)
	is.NoErr(err)
	hctx := helperapi.Context{CapabilityDigest: neg.CapabilityDigest, Fence: rec.Fence, InstanceID: in.InstanceID, ProjectID: neg.ProjectID}
	plan, err := hc.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindStart, ContainerID: in.ContainerID, Context: hctx})
	is.NoErr(err)
	rec.Attempts++
	rec.Pending = &container.Pending{Step: container.StepStart, Op: helperapi.OpStart, Idem: "sv-" + in.InstanceID + "-start-" + strconv.Itoa(rec.Attempts),
		ContainerID: in.ContainerID, PlanHash: plan.PlanHash, ProjectID: neg.ProjectID, CapabilityDigest: neg.CapabilityDigest, Fence: rec.Fence}
	is.NoErr(rec.Save(dir))
	ct, err := hc.Start(ctx, rec.Pending.Idem, &helperapi.MutationRequest{ContainerID: in.ContainerID, Context: hctx, PlanHash: plan.PlanHash})
	is.NoErr(err)
	is.Equal(ct.Status, "running")

	e.boot() // reconcile replays the pending start
	rec, err = container.LoadRecord(dir)
	is.NoErr(err)
	is.True(rec.Pending == nil)
	is.True(rec.Started())
	is.Equal(rec.PID, ct.Pid)
	is.Equal(rec.Fence, uint64(2))
	st, err := e.c.Status(ctx, in.InstanceID)
	is.NoErr(err)
	is.Equal(st.State, api.StateRunning)
	e.waitLog(in.InstanceID, "hello-ctr", 5*time.Second)
	out, err := e.c.Stop(ctx, in.InstanceID)
	is.NoErr(err)
	is.Equal(out.State, api.StateStopped)
	is.Equal(len(runcList(t, e.root)), 0)
}
