package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"hostkit.dev/lib/wire"
)

// rootfsOnce builds the shared read-only busybox rootfs once per test
// binary: /bin/busybox (busybox-static) and applet symlinks.
var (
	rootfsOnce sync.Once
	rootfsDir  string
	rootfsErr  error
)

// testRootfs returns the shared rootfs, building it on first use.
func testRootfs(t testing.TB) string {
	t.Helper()
	rootfsOnce.Do(func() {
		var dir string
		if dir, rootfsErr = os.MkdirTemp("/tmp", "hkpr"); rootfsErr != nil {
			return
		}
		rootfsDir = dir
		bin := filepath.Join(dir, "bin")
		if rootfsErr = os.Mkdir(bin, 0o755); rootfsErr != nil {
			return
		}
		var b []byte
		if b, rootfsErr = os.ReadFile("/bin/busybox"); rootfsErr != nil {
			return
		}
		if rootfsErr = os.WriteFile(filepath.Join(bin, "busybox"), b, 0o755); rootfsErr != nil {
			return
		}
		for _, a := range []string{"sh", "sleep", "echo", "cat", "true"} {
			if rootfsErr = os.Symlink("busybox", filepath.Join(bin, a)); rootfsErr != nil {
				return
			}
		}
		for _, d := range []string{"proc", "dev", "sys", "tmp"} {
			if rootfsErr = os.Mkdir(filepath.Join(dir, d), 0o755); rootfsErr != nil {
				return
			}
		}
	})
	if rootfsErr != nil {
		t.Fatalf("rootfs: %v", rootfsErr)
	}
	return rootfsDir
}

// removeRootfs removes the shared rootfs (TestMain, after every test).
func removeRootfs() {
	if rootfsDir != "" {
		os.RemoveAll(rootfsDir)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testEnv is one provider on a private root, with a directory for its
// bundles and console logs.
type testEnv struct {
	name   string
	dir    string // os.MkdirTemp("/tmp", "hkp"): root/, log/, b/<bundle>/, c/<console logs>
	cfg    Config
	p      RuntimeProvider
	logs   *syncBuffer
	bundle int
}

// newEnv makes a provider for runtime name on a fresh root; everything is
// removed when the test ends (after the containers' own cleanups).
func newEnv(t testing.TB, name string) *testEnv {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "hkp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"b", "c"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	e := &testEnv{name: name, dir: dir, logs: &syncBuffer{}}
	var w io.Writer = e.logs
	if *verbose {
		w = io.MultiWriter(e.logs, os.Stderr)
	}
	e.cfg = Config{Root: filepath.Join(dir, "root"), LogDir: filepath.Join(dir, "log"),
		Logger: slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if e.p, err = New(name, e.cfg); err != nil {
		t.Fatalf("New(%s): %v", name, err)
	}
	return e
}

// ann are the annotations the tests put on their containers.
func ann(id string) map[string]string {
	return map[string]string{"dev.hostkit.project": "p-" + id, "dev.hostkit.fence": "7"}
}

// makeBundle writes a bundle whose process runs args, with annotations
// (none when nil) and a cgroup path unique to this env and id (two roots
// may hold the same id; their cgroups must not collide).
func (e *testEnv) makeBundle(t testing.TB, id string, annotations map[string]string, args ...string) string {
	t.Helper()
	if len(args) == 0 {
		args = []string{"sleep", "600"}
	}
	e.bundle++
	dir := filepath.Join(e.dir, "b", id+"-"+strconv.Itoa(e.bundle))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	caps := []string{"CAP_KILL", "CAP_NET_BIND_SERVICE"}
	spec := specs.Spec{
		Version: "1.0.2",
		Process: &specs.Process{
			Terminal:        false,
			User:            specs.User{UID: 0, GID: 0},
			Args:            args,
			Env:             []string{"PATH=/bin"},
			Cwd:             "/",
			Capabilities:    &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps},
			NoNewPrivileges: true,
		},
		Root:     &specs.Root{Path: testRootfs(t), Readonly: true},
		Hostname: "hk",
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "size=1m"}},
		},
		Annotations: annotations,
		Linux: &specs.Linux{
			CgroupsPath: "/" + filepath.Base(e.dir) + "-" + id,
			Resources:   &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
			Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace}, {Type: specs.UTSNamespace}, {Type: specs.MountNamespace}},
			MaskedPaths:   []string{"/proc/kcore", "/proc/keys", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/sys", "/proc/sysrq-trigger"},
		},
	}
	b, err := json.MarshalIndent(&spec, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// consoleLog returns the console log path for id.
func (e *testEnv) consoleLog(id string) string { return filepath.Join(e.dir, "c", id+".log") }

// create makes container id running args (default: sleep) and registers
// its cleanup (kill, delete --force) on this provider.
func (e *testEnv) create(t testing.TB, id string, annotations map[string]string, args ...string) {
	t.Helper()
	spec := CreateSpec{ID: id, Bundle: e.makeBundle(t, id, annotations, args...), ConsoleLog: e.consoleLog(id)}
	if err := e.p.Create(context.Background(), spec); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	e.cleanup(t, e.p, id)
}

// cleanup registers kill + delete --force of id through p; a missing
// container is fine (the test deleted it).
func (e *testEnv) cleanup(t testing.TB, p RuntimeProvider, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = p.Kill(ctx, id, syscall.SIGKILL, false)
		if err := p.Delete(ctx, id, true); err != nil && !wire.HasCode(err, CodeNotFound) {
			t.Errorf("cleanup of %s: %v", id, err)
		}
	})
}

// waitStatus polls State until id has status want (5 s at most).
func waitStatus(t testing.TB, p RuntimeProvider, id string, want Status) *State {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := p.State(context.Background(), id)
		if err != nil {
			t.Fatalf("state %s: %v", id, err)
		}
		if st.Status == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("state %s: %s, want %s", id, st.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantCode fails unless err carries code.
func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if !wire.HasCode(err, code) {
		t.Fatalf("got %v, want code %s", err, code)
	}
	var we *wire.Error
	if !errors.As(err, &we) {
		t.Fatalf("%v is not a *wire.Error", err)
	}
}

// procexecRuns counts the procexec.run lines logged so far.
func (e *testEnv) procexecRuns() int { return strings.Count(e.logs.String(), `"msg":"procexec.run"`) }
