package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/opencontainers/go-digest"
	"hostkit.dev/cmd/containerization-helper/internal/image"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
	"hostkit.dev/cmd/containerization-helper/internal/provider"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/procexec"
)

// limitsEnv is a real runc provider on a private root and an unpacker
// with the helper's rootfs cache, as Open wires them.
type limitsEnv struct {
	dir     string // root/, runtime-log/, bundles/, rootfs/, logs/
	rt      provider.RuntimeProvider
	unp     *image.Unpacker
	layout  string
	digest  string
	bundles string
	cache   string
}

func newLimitsEnv(t *testing.T) *limitsEnv {
	t.Helper()
	is := is.New(t)
	dir, err := os.MkdirTemp("/tmp", "hksl")
	is.NoErr(err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &limitsEnv{dir: dir, bundles: filepath.Join(dir, "bundles"), cache: filepath.Join(dir, "rootfs")}
	for _, d := range []string{e.bundles, e.cache, filepath.Join(dir, "logs")} {
		is.NoErr(os.Mkdir(d, 0o700))
	}
	e.rt, err = provider.New(provider.Runc, provider.Config{Root: filepath.Join(dir, "root"), LogDir: filepath.Join(dir, "runtime-log"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	is.NoErr(err)
	pol, err := procexec.NewPolicy([]procexec.Rule{image.Rule(image.DefaultUmoci)}, []string{image.MutationUnpack})
	is.NoErr(err)
	r, err := procexec.NewRunner(procexec.Config{Policy: pol})
	is.NoErr(err)
	e.unp, err = image.NewUnpacker(image.Config{Runner: r})
	is.NoErr(err)
	l, d := imagetest.Build(t, t.TempDir())
	e.layout, e.digest = l, d.String()
	return e
}

// newID is a helper-made container id (random).
func newID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	id := helperapi.ContainerIDPrefix + hex.EncodeToString(b)
	if !validID(id) {
		t.Fatalf("bad test id %s", id)
	}
	return id
}

// run prepares a bundle for args with patch p (the helper's cgroup path
// added), creates and starts it, and returns the id and console log; the
// container is deleted when the test ends.
func (e *limitsEnv) run(t *testing.T, p image.Patch, args ...string) (string, string) {
	t.Helper()
	is := is.New(t)
	ctx := context.Background()
	id := newID(t)
	p.Args, p.CgroupsPath = args, cgroupParent+"/"+id
	b, err := e.unp.Prepare(ctx, image.Request{Layout: e.layout, Manifest: digest.Digest(e.digest), Root: e.bundles, Name: id, Patch: p}, e.cache)
	is.NoErr(err)
	log := filepath.Join(e.dir, "logs", id+".log")
	is.NoErr(e.rt.Create(ctx, provider.CreateSpec{ID: id, Bundle: b.Path, ConsoleLog: log}))
	t.Cleanup(func() { e.rt.Delete(context.Background(), id, true) })
	is.NoErr(e.rt.Start(ctx, id))
	return id, log
}

// waitStopped waits up to 10 s for id to stop.
func (e *limitsEnv) waitStopped(t *testing.T, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err := e.rt.State(context.Background(), id)
		if err == nil && st.Status == provider.StatusStopped {
			return
		}
	}
	t.Fatalf("%s did not stop", id)
}

// cgroupFile reads name in id's memory cgroup, wherever runc put it
// (state.json's cgroup_paths: "memory" on a v1 or hybrid host, "" on a
// v2 host).
func (e *limitsEnv) cgroupFile(t *testing.T, id, v1, v2 string) string {
	t.Helper()
	var st struct {
		Paths map[string]string `json:"cgroup_paths"`
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "root", id, "state.json"))
	must(t, err)
	must(t, json.Unmarshal(b, &st))
	p, name := st.Paths["memory"], v1
	if p == "" {
		p, name = st.Paths[""], v2
	}
	out, err := os.ReadFile(filepath.Join(p, name))
	must(t, err)
	return strings.TrimSpace(string(out))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The console log is the container's stdout and stderr, and the bundle's
// RLIMIT_FSIZE bounds it: a container that writes without end is stopped
// at the cap (SIGXFSZ) and its log holds at most the cap; one that writes
// less runs to its end and its log holds all of it.
func TestConsoleLogCap(t *testing.T) {
	t.Parallel()
	e := newLimitsEnv(t)
	const limit = 256 << 10
	tests := []struct {
		name string
		args []string
		want func(t *testing.T, is *is.I, log []byte)
	}{
		{"past the cap", []string{"/bin/sh", "-c", "cat /dev/zero; echo survived"}, func(t *testing.T, is *is.I, log []byte) {
			t.Logf("console log: %d bytes, cap %d", len(log), limit)
			is.True(len(log) <= limit)
			is.True(len(log) >= limit-64<<10)                   // it did write up to the cap
			is.True(!strings.Contains(string(log), "survived")) // the shell itself was stopped writing
		}},
		{"under the cap", []string{"/bin/sh", "-c", "echo hello; echo world"}, func(t *testing.T, is *is.I, log []byte) {
			is.Equal(string(log), "hello\nworld\n")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			id, log := e.run(t, image.Patch{FileSizeLimit: limit}, tc.args...)
			e.waitStopped(t, id)
			b, err := os.ReadFile(log)
			is.NoErr(err)
			tc.want(t, is, b)
		})
	}
}

// A bundle gets a memory cgroup limit (Patch.MemoryLimit, else
// image.DefaultMemoryLimit), RLIMIT_FSIZE and no_new_privs; runc applies
// them to the container.
func TestBundleLimitsApplied(t *testing.T) {
	t.Parallel()
	e := newLimitsEnv(t)
	tests := []struct {
		name   string
		patch  image.Patch
		memory int64
		fsize  int64
	}{
		{"defaults", image.Patch{}, image.DefaultMemoryLimit, image.DefaultFileSizeLimit},
		{"set", image.Patch{MemoryLimit: 64 << 20, FileSizeLimit: 1 << 20}, 64 << 20, 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			id, _ := e.run(t, tc.patch, "/bin/sleep", "600")
			is.Equal(e.cgroupFile(t, id, "memory.limit_in_bytes", "memory.max"), strconv.FormatInt(tc.memory, 10))
			st, err := e.rt.State(context.Background(), id)
			is.NoErr(err)
			limits, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/limits")
			is.NoErr(err)
			n := strconv.FormatInt(tc.fsize, 10)
			var fsize []string
			for _, l := range strings.Split(string(limits), "\n") {
				if rest, ok := strings.CutPrefix(l, "Max file size"); ok {
					fsize = strings.Fields(rest)
				}
			}
			is.Equal(fsize, []string{n, n, "bytes"}) // soft = hard
			status, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/status")
			is.NoErr(err)
			is.True(strings.Contains(string(status), "NoNewPrivs:\t1"))
		})
	}
}
