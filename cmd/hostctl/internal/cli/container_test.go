package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	svapi "hostkit.dev/lib/api/supervisordapi"
)

// buildImage makes a one-layer OCI image layout with busybox (Debian's
// busybox-static) using umoci, and returns the layout and its manifest
// digest. Test-only: production code reaches umoci only through the helper.
func buildImage(t *testing.T, dir string) (layout, digest string) {
	t.Helper()
	layout = filepath.Join(dir, "img")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("umoci", args...).CombinedOutput(); err != nil {
			t.Fatalf("umoci %v: %v\n%s", args, err, out)
		}
	}
	run("init", "--layout", layout)
	run("new", "--image", layout+":t")
	bundle := filepath.Join(dir, "b")
	run("unpack", "--image", layout+":t", bundle)
	bin := filepath.Join(bundle, "rootfs", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox-static is required (scripts/setup installs it): %v", err)
	}
	if err := os.WriteFile(filepath.Join(bin, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"sh", "echo", "sleep", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(bin, l)); err != nil {
			t.Fatal(err)
		}
	}
	run("repack", "--image", layout+":t", bundle)
	var idx struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil || json.Unmarshal(b, &idx) != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, b)
	}
	return layout, idx.Manifests[0].Digest
}

// cliJSON runs hostctl with --json and decodes its answer into v.
func cliJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	// --json goes before a "--" that starts the container's command.
	at := slices.Index(args, "--")
	if at < 0 {
		at = len(args)
	}
	args = slices.Insert(slices.Clone(args), at, "--json")
	code, out, errOut := runCLI(args...)
	if code != 0 {
		t.Fatalf("hostctl %v: exit %d: %s", args, code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("hostctl %v: %q: %v", args, out, err)
	}
}

// Every `hostctl container` subcommand against the real helper and real
// runc: negotiate, images (evidence), plan/create/start, observe, logs,
// usage, a refused mutation without a plan, then plan/delete.
func TestContainerCommands(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := shortRoot(t)
	startDaemon(t, "containerization-helper", "helper", root, "-idle-timeout", "0")
	layout, digest := buildImage(t, t.TempDir())
	r := []string{"-root", root, "container"}
	inst := svapi.NewID()

	var neg map[string]any
	cliJSON(t, &neg, append(r, "negotiate")...)
	is.Equal(neg["provider"], "runc")
	is.True(strings.HasPrefix(neg["capability_digest"].(string), "sha256:"))

	var ev map[string]any
	cliJSON(t, &ev, append(r, "images", "--image", layout)...)
	is.Equal(ev["manifest_digest"], digest)

	var plan map[string]any
	cliJSON(t, &plan, append(r, "plan", "--kind", "create", "--instance", inst, "--image", layout, "--digest", digest,
		"--", "/bin/sh", "-c", "echo hello-from-ctr; exec sleep 60")...)
	id := plan["container_id"].(string)
	is.True(strings.HasPrefix(id, "hk-"))
	t.Cleanup(func() {
		var p map[string]any
		code, out, _ := runCLI(append(r, "plan", "--kind", "delete", "--force", "--instance", inst, "--container", id, "--json")...)
		if code == 0 && json.Unmarshal([]byte(out), &p) == nil {
			runCLI(append(r, "delete", "--plan", p["plan_hash"].(string), "--instance", inst, "--container", id)...)
		}
	})

	// A mutation with a made-up plan hash is refused with its code.
	code, _, errOut := runCLI(append(r, "create", "--plan", "sha256:"+strings.Repeat("0", 64), "--instance", inst, "--container", id)...)
	is.True(code != 0)
	is.True(strings.Contains(errOut, "plan."))

	var ct map[string]any
	cliJSON(t, &ct, append(r, "create", "--plan", plan["plan_hash"].(string), "--instance", inst, "--container", id)...)
	is.Equal(ct["status"], "created")
	cliJSON(t, &plan, append(r, "plan", "--kind", "start", "--instance", inst, "--container", id)...)
	cliJSON(t, &ct, append(r, "start", "--plan", plan["plan_hash"].(string), "--instance", inst, "--container", id)...)
	is.Equal(ct["status"], "running")

	var obs struct {
		Containers []map[string]any `json:"containers"`
	}
	cliJSON(t, &obs, append(r, "observe")...)
	is.Equal(len(obs.Containers), 1)
	is.Equal(obs.Containers[0]["container_id"], id)
	is.Equal(obs.Containers[0]["instance_id"], inst)

	var logs map[string]any
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		cliJSON(t, &logs, append(r, "logs", id)...)
		if strings.Contains(logs["data"].(string), "hello-from-ctr") {
			break
		}
	}
	is.True(strings.Contains(logs["data"].(string), "hello-from-ctr"))

	var use map[string]any
	cliJSON(t, &use, append(r, "usage", id)...)
	is.True(use["pids"].(float64) >= 1)

	cliJSON(t, &plan, append(r, "plan", "--kind", "delete", "--force", "--stop-timeout", "1s", "--instance", inst, "--container", id)...)
	var del map[string]any
	cliJSON(t, &del, append(r, "delete", "--plan", plan["plan_hash"].(string), "--instance", inst, "--container", id)...)
	is.Equal(del["deleted"], true)
	obs.Containers = nil
	cliJSON(t, &obs, append(r, "observe")...)
	is.Equal(len(obs.Containers), 0) // deleted: no longer owned or listed

	// Usage errors are exit 2.
	code, _, _ = runCLI(append(r, "logs")...)
	is.Equal(code, 2)
}

// Missing or malformed plan flags are usage errors (exit 2) that name the
// flag, before any daemon is asked.
func TestContainerPlanUsageErrors(t *testing.T) {
	t.Parallel()
	inst := svapi.NewID()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--instance", inst}, "--kind"},
		{[]string{"--kind", "create", "--instance", inst, "--", "/bin/true"}, "--image"},
		{[]string{"--kind", "create", "--instance", inst, "--image", "/x", "--digest", "sha256:00"}, "after --"},
		{[]string{"--kind", "start", "--instance", inst}, "--container"},
		{[]string{"--kind", "start", "--instance", "foo", "--container", "hk-0000000000000000"}, "--instance"},
		{[]string{"--kind", "start", "--instance", strings.ToUpper(inst), "--container", "hk-0000000000000000"}, "--instance"},
	} {
		code, _, errOut := runCLI(append([]string{"-root", "/tmp/hk-none", "container", "plan"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("plan %v: exit %d, %q; want exit 2 naming %s", tc.args, code, errOut, tc.want)
		}
	}
}
