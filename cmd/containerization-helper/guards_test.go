package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/wire"
)

// TestMutationRefusedBeforeExecution: a mutation without a plan hash,
// with a stale fence, a wrong capability digest, another project, a plan
// of another kind or container, a consumed plan, or an unsafe id is
// refused with its typed code, and the runtime is never asked: the
// container stays as it was.
func TestMutationRefusedBeforeExecution(t *testing.T) {
	t.Parallel()
	_, s, img := helperSession(t)
	ctx := ctxT(t, 2*time.Minute)
	c := s.create(t, img, []string{"/bin/sleep", "600"}, nil, false)
	// A newer fence for the instance makes fence 1 stale.
	s2 := *s
	s2.cx.Fence = 5
	p5, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindStart, ContainerID: c.ContainerID, Context: s2.cx})
	is.New(t).NoErr(err)
	startPlan, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindStart, ContainerID: c.ContainerID, Context: s.cx})
	is.New(t).NoErr(err)
	other := s.create(t, img, []string{"/bin/sleep", "600"}, nil, false)

	for _, tc := range []struct {
		name string
		op   string
		req  helperapi.MutationRequest
		code string
	}{
		{"no plan hash", helperapi.OpStart, helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s.cx}, helperapi.CodePlanRequired},
		{"unknown plan", helperapi.OpStart, helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s.cx, PlanHash: "sha256:" + strings.Repeat("0", 64)}, "plan.unknown"},
		{"wrong capability digest", helperapi.OpStart, helperapi.MutationRequest{ContainerID: c.ContainerID, PlanHash: startPlan.PlanHash,
			Context: helperapi.Context{CapabilityDigest: "sha256:" + strings.Repeat("1", 64), Fence: 1, InstanceID: s.cx.InstanceID, ProjectID: s.cx.ProjectID}}, helperapi.CodeCapabilityMismatch},
		{"another project", helperapi.OpStart, helperapi.MutationRequest{ContainerID: c.ContainerID, PlanHash: startPlan.PlanHash,
			Context: helperapi.Context{CapabilityDigest: s.cx.CapabilityDigest, Fence: 1, InstanceID: s.cx.InstanceID, ProjectID: newUUID(t)}}, helperapi.CodeProjectMismatch},
		{"plan of another kind", helperapi.OpDelete, helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s.cx, PlanHash: startPlan.PlanHash}, helperapi.CodePlanMismatch},
		{"plan of another container", helperapi.OpStart, helperapi.MutationRequest{ContainerID: other.ContainerID, Context: s.cx, PlanHash: startPlan.PlanHash}, helperapi.CodePlanMismatch},
		{"traversal id", helperapi.OpStart, helperapi.MutationRequest{ContainerID: "../evil", Context: s.cx, PlanHash: startPlan.PlanHash}, "container.invalid_id"},
		// Carrying out the fence-5 plan raises the instance's fence ...
		{"newer fence", helperapi.OpStart, helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s2.cx, PlanHash: p5.PlanHash}, ""},
		// ... so the fence-1 plan is stale now.
		{"stale fence", helperapi.OpStart, helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s.cx, PlanHash: startPlan.PlanHash}, "fence.stale"},
		{"consumed plan", helperapi.OpStart, helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s2.cx, PlanHash: p5.PlanHash}, "plan.unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			before, err := s.c.Observe(ctx)
			is.NoErr(err)
			var out helperapi.Container
			err = s.c.RPC().Call(ctx, tc.op, &tc.req, &out, rpcIdem(newIdem(t)))
			if tc.code == "" {
				is.NoErr(err)
				return
			}
			is.Equal(wire.CodeOf(err), tc.code)
			after, err := s.c.Observe(ctx)
			is.NoErr(err)
			is.Equal(after.Digest, before.Digest) // nothing ran
		})
	}
	// Without an idempotency key a mutation is refused by the rpc layer.
	var out helperapi.Container
	err = s.c.RPC().Call(ctx, helperapi.OpStart, &helperapi.MutationRequest{ContainerID: c.ContainerID, Context: s2.cx}, &out)
	is.New(t).Equal(wire.CodeOf(err), wire.CodeRequestIdemRequired)
	// A create plan with terminal set, a relative layout, or no command is
	// refused at plan time.
	for _, pr := range []helperapi.PlanRequest{
		{Kind: helperapi.KindCreate, Context: s.cx, Image: &img, Command: []string{"/bin/true"}, Terminal: true},
		{Kind: helperapi.KindCreate, Context: s.cx, Image: &helperapi.ImageRef{Layout: "rel/layout", ManifestDigest: img.ManifestDigest}, Command: []string{"/bin/true"}},
		{Kind: helperapi.KindCreate, Context: s.cx, Image: &helperapi.ImageRef{Layout: img.Layout + "/../x", ManifestDigest: img.ManifestDigest}, Command: []string{"/bin/true"}},
		{Kind: helperapi.KindCreate, Context: s.cx, Image: &img},
		{Kind: "exec", Context: s.cx},
	} {
		_, err := s.c.Plan(ctx, &pr)
		is.New(t).True(err != nil)
	}
	s.cx = s2.cx // the clean-up deletes under the instance's current fence
}

// runc runs runc directly, as another tool on the host would (not the
// helper: these containers are the ones it must never touch). Its output
// goes to a file: `runc create` with pipe stdio never reaches EOF while
// the container lives.
func runc(t *testing.T, root string, args ...string) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "runc-out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("/usr/sbin/runc", append([]string{"--root", root}, args...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(f.Name())
		t.Fatalf("runc %v: %v\n%s", args, err, out)
	}
}

// foreignBundle makes a bundle for a container that is not the helper's:
// it copies a helper-made bundle's config (whose root.path is the shared,
// read-only rootfs cache entry), replaces every annotation with ann, and
// gives it its own cgroup.
func foreignBundle(t *testing.T, from, dir string, ann map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(from, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["annotations"] = ann
	cfg["linux"].(map[string]any)["cgroupsPath"] = "/hkt-" + filepath.Base(dir) + "-" + filepath.Base(filepath.Dir(dir))
	b, _ = json.Marshal(cfg)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestObserveOwnership: observe lists only the helper's own containers.
// One made with runc in the helper's root without our annotations, or
// with another project's, is listed as foreign and every mutation of it
// is refused (container.not_owned); one in another root is invisible.
func TestObserveOwnership(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	img := fixture(t)
	root := newRoot(t)
	h := startHelper(t, "", root, "-allow-exe", selfExe(t))
	s := newSession(t, h)
	ctx := ctxT(t, 2*time.Minute)
	mine := s.create(t, img, []string{"/bin/sleep", "600"}, nil, false)
	helperRoot := runtimeRoot(root)
	bundle := filepath.Join(root, "state", "helper", "bundles", mine.ContainerID)

	plain := "hk-00000000000000aa" // a name in the helper's own form grants nothing
	other := "hk-00000000000000bb"
	outside := "hk-00000000000000cc"
	foreignRoot := filepath.Join(newRoot(t), "runc")
	dir := t.TempDir()
	runc(t, helperRoot, "create", "--bundle", foreignBundle(t, bundle, filepath.Join(dir, "a"), map[string]string{}), plain)
	t.Cleanup(func() { exec.Command("/usr/sbin/runc", "--root", helperRoot, "delete", "--force", plain).Run() })
	runc(t, helperRoot, "create", "--bundle", foreignBundle(t, bundle, filepath.Join(dir, "b"), map[string]string{
		helperapi.AnnotationProject: newUUID(t), helperapi.AnnotationInstance: s.cx.InstanceID, helperapi.AnnotationFence: "1"}), other)
	t.Cleanup(func() { exec.Command("/usr/sbin/runc", "--root", helperRoot, "delete", "--force", other).Run() })
	runc(t, foreignRoot, "create", "--bundle", foreignBundle(t, bundle, filepath.Join(dir, "c"), map[string]string{
		helperapi.AnnotationProject: s.cx.ProjectID, helperapi.AnnotationInstance: s.cx.InstanceID, helperapi.AnnotationFence: "1"}), outside)
	t.Cleanup(func() { exec.Command("/usr/sbin/runc", "--root", foreignRoot, "delete", "--force", outside).Run() })

	obs, err := s.c.Observe(ctx)
	is.NoErr(err)
	is.Equal(len(obs.Containers), 1)
	is.Equal(obs.Containers[0].ContainerID, mine.ContainerID)
	is.Equal(obs.Foreign, []string{plain, other}) // sorted; the one in another root is not there

	for _, id := range []string{plain, other} {
		for _, kind := range []string{helperapi.KindStart, helperapi.KindDelete, helperapi.KindRestart} {
			_, err := s.c.Plan(ctx, &helperapi.PlanRequest{Kind: kind, ContainerID: id, Context: s.cx, Force: kind == helperapi.KindDelete})
			is.Equal(wire.CodeOf(err), helperapi.CodeContainerNotOwned)
		}
		_, err := s.c.Usage(ctx, id)
		is.Equal(wire.CodeOf(err), helperapi.CodeContainerNotOwned)
		_, err = s.c.Logs(ctx, &helperapi.LogsRequest{ContainerID: id})
		is.Equal(wire.CodeOf(err), helperapi.CodeContainerNotOwned)
	}
	// The container in another root does not exist for the helper.
	_, err = s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: outside, Context: s.cx, Force: true})
	is.Equal(wire.CodeOf(err), "container.not_found")
	// Another instance of the same project cannot mutate ours.
	stranger := s.cx
	stranger.InstanceID = newUUID(t)
	_, err = s.c.Plan(ctx, &helperapi.PlanRequest{Kind: helperapi.KindDelete, ContainerID: mine.ContainerID, Context: stranger, Force: true})
	is.Equal(wire.CodeOf(err), helperapi.CodeContainerNotOwned)
	// The foreign containers are untouched: still there, still created.
	out, err := exec.Command("/usr/sbin/runc", "--root", helperRoot, "list", "-q").Output()
	is.NoErr(err)
	is.True(strings.Contains(string(out), plain) && strings.Contains(string(out), other))
}
