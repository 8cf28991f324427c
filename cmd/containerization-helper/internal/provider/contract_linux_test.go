package provider

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/procstat"
	"hostkit.dev/lib/redact"
)

// runtimes are the providers every contract case runs against.
var runtimes = []string{Runc, Crun}

// contractCases is the one table both providers must pass (the provider
// contract behind docs/containerization-helper.md, "Ops"). Each case gets a
// fresh provider on its own root.
var contractCases = []struct {
	name string
	run  func(t *testing.T, e *testEnv)
}{
	{"negotiate", testNegotiate},
	{"lifecycle", testLifecycle},
	{"id_traversal_refused_before_execution", testIDTraversal},
	{"duplicate_create", testDuplicateCreate},
	{"delete_created_not_started", testDeleteCreated},
	{"missing_id", testMissing},
	{"empty_list", testEmptyList},
	{"pipe_hang_guard", testPipeHangGuard},
	{"orphan_in_created_seen_by_fresh_provider", testOrphan},
	{"foreign_root_invisible", testForeignRoot},
	{"stats_and_ps", testStatsPs},
	{"bad_state", testBadState},
	{"invalid_arguments", testInvalidArguments},
	{"runtime_messages_redacted", testRedaction},
}

func TestContract(t *testing.T) {
	for _, name := range runtimes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, c := range contractCases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newEnv(t, name))
				})
			}
		})
	}
}

func testNegotiate(t *testing.T, e *testEnv) {
	is := is.New(t)
	info, err := e.p.Negotiate(context.Background())
	is.NoErr(err)
	is.Equal(info.Name, e.name)
	is.Equal(info.Codec, map[string]string{Runc: "runc-1.1", Crun: "crun-1.8"}[e.name])
	is.Equal(info.Root, e.cfg.Root)
	is.True(filepath.IsAbs(info.Path))
	is.True(info.HostKind != "")
	is.Equal(info.Wrapped, e.name == Crun && info.HostKind == HostCgroupHybrid)
	again, err := e.p.Negotiate(context.Background())
	is.NoErr(err)
	is.Equal(again, info) // cached
}

func testLifecycle(t *testing.T, e *testEnv) {
	is := is.New(t)
	ctx := context.Background()
	e.create(t, "life", ann("life"), "sh", "-c", "echo hello-out; echo hello-err >&2; exec sleep 600")
	st, err := e.p.State(ctx, "life")
	is.NoErr(err)
	is.Equal(st.Status, StatusCreated)
	is.True(st.Pid > 0)
	is.Equal(st.Annotations, ann("life"))
	is.True(strings.HasPrefix(st.Bundle, e.dir))
	is.True(time.Since(st.Created) < time.Minute)
	is.NoErr(e.p.Start(ctx, "life"))
	st = waitStatus(t, e.p, "life", StatusRunning)
	is.True(st.Pid > 0)
	waitConsole(t, e.consoleLog("life"), "hello-out", "hello-err")
	list, err := e.p.List(ctx)
	is.NoErr(err)
	is.Equal(len(list), 1)
	is.Equal(list[0].ID, "life")
	is.Equal(list[0].Status, StatusRunning)
	is.Equal(list[0].Annotations, ann("life"))
	is.NoErr(e.p.Kill(ctx, "life", syscall.SIGKILL, false))
	waitStatus(t, e.p, "life", StatusStopped)
	is.NoErr(e.p.Delete(ctx, "life", false))
	_, err = e.p.State(ctx, "life")
	wantCode(t, err, CodeNotFound)
	_, err = os.Stat("/proc/" + strconv.Itoa(st.Pid))
	is.True(os.IsNotExist(err)) // the init was reaped, not left a zombie
	list, err = e.p.List(ctx)
	is.NoErr(err)
	is.Equal(len(list), 0)
}

// waitConsole waits until the console log holds every want.
func waitConsole(t *testing.T, path string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(string(b), w)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("console log %q lacks %q", b, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testIDTraversal(t *testing.T, e *testEnv) {
	ctx := context.Background()
	bundle := e.makeBundle(t, "x", nil, "true")
	for _, id := range []string{"../evil", "..", "a/../b", "a..b", "evil/x", "/abs", "", "Upper", "-flag", ".dot", "_u",
		"a b", "a\x00b", "é", strings.Repeat("a", 65)} {
		t.Run(strconv.Quote(id), func(t *testing.T) {
			before := e.procexecRuns()
			wantCode(t, e.p.Create(ctx, CreateSpec{ID: id, Bundle: bundle, ConsoleLog: e.consoleLog("x")}), CodeInvalidID)
			wantCode(t, e.p.Start(ctx, id), CodeInvalidID)
			wantCode(t, e.p.Kill(ctx, id, syscall.SIGKILL, true), CodeInvalidID)
			wantCode(t, e.p.Delete(ctx, id, true), CodeInvalidID)
			_, err := e.p.State(ctx, id)
			wantCode(t, err, CodeInvalidID)
			_, err = e.p.Stats(ctx, id)
			wantCode(t, err, CodeInvalidID)
			_, err = e.p.Ps(ctx, id)
			wantCode(t, err, CodeInvalidID)
			if n := e.procexecRuns() - before; n != 0 {
				t.Fatalf("%d commands ran for an invalid id", n)
			}
		})
	}
	for _, p := range []string{filepath.Join(e.dir, "evil"), filepath.Join(filepath.Dir(e.cfg.Root), "evil"), "/tmp/evil"} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists", p)
		}
	}
	_, err := os.Stat(e.consoleLog("x"))
	is.New(t).True(os.IsNotExist(err)) // not even the console log was made
}

func testDuplicateCreate(t *testing.T, e *testEnv) {
	is := is.New(t)
	ctx := context.Background()
	e.create(t, "dup", ann("dup"))
	before, err := e.p.State(ctx, "dup")
	is.NoErr(err)
	err = e.p.Create(ctx, CreateSpec{ID: "dup", Bundle: e.makeBundle(t, "dup", nil, "true"), ConsoleLog: e.consoleLog("dup")})
	wantCode(t, err, CodeExists)
	after, err := e.p.State(ctx, "dup")
	is.NoErr(err)
	is.Equal(after.Pid, before.Pid) // untouched
	is.Equal(after.Annotations, ann("dup"))
	b, err := os.ReadFile(e.consoleLog("dup"))
	is.NoErr(err)
	is.Equal(len(b), 0) // nothing written into the existing container's console
}

func testDeleteCreated(t *testing.T, e *testEnv) {
	is := is.New(t)
	ctx := context.Background()
	e.create(t, "early", ann("early"))
	st, err := e.p.State(ctx, "early")
	is.NoErr(err)
	is.Equal(st.Status, StatusCreated)
	is.NoErr(e.p.Delete(ctx, "early", false))
	_, err = e.p.State(ctx, "early")
	wantCode(t, err, CodeNotFound)
	_, err = os.Stat("/proc/" + strconv.Itoa(st.Pid))
	is.True(os.IsNotExist(err)) // killed and reaped
}

func testMissing(t *testing.T, e *testEnv) {
	ctx := context.Background()
	wantCode(t, e.p.Delete(ctx, "missing", false), CodeNotFound)
	wantCode(t, e.p.Delete(ctx, "missing", true), CodeNotFound)
	wantCode(t, e.p.Start(ctx, "missing"), CodeNotFound)
	wantCode(t, e.p.Kill(ctx, "missing", syscall.SIGTERM, false), CodeNotFound)
	_, err := e.p.State(ctx, "missing")
	wantCode(t, err, CodeNotFound)
	_, err = e.p.Ps(ctx, "missing")
	wantCode(t, err, CodeNotFound)
	_, err = e.p.Stats(ctx, "missing")
	wantCode(t, err, CodeNotFound)
}

func testEmptyList(t *testing.T, e *testEnv) {
	is := is.New(t)
	list, err := e.p.List(context.Background())
	is.NoErr(err)
	is.True(list != nil) // runc prints null, crun []: both are an empty slice
	is.Equal(len(list), 0)
}

// testPipeHangGuard: `runc create` with pipe stdio never returns while the
// container lives. Through the provider, create returns promptly, the
// container's stdout and stderr are the console log file (not a pipe, not
// procexec's temporary files), and the init survives procexec's kill of
// the runtime's process group (it is in its own session).
func testPipeHangGuard(t *testing.T, e *testEnv) {
	is := is.New(t)
	ctx := context.Background()
	bundle := e.makeBundle(t, "hang", ann("hang"), "sh", "-c", "echo guard-out; echo guard-err >&2; exec sleep 600")
	start := time.Now()
	is.NoErr(e.p.Create(ctx, CreateSpec{ID: "hang", Bundle: bundle, ConsoleLog: e.consoleLog("hang")}))
	took := time.Since(start)
	e.cleanup(t, e.p, "hang")
	if took > 3*time.Second {
		t.Fatalf("create took %s", took)
	}
	st, err := e.p.State(ctx, "hang")
	is.NoErr(err)
	is.Equal(st.Status, StatusCreated)
	ps, err := procstat.Read(st.Pid)
	is.NoErr(err)
	is.Equal(ps.Session, st.Pid) // its own session, out of procexec's group
	for _, fd := range []string{"1", "2"} {
		target, err := os.Readlink("/proc/" + strconv.Itoa(st.Pid) + "/fd/" + fd)
		is.NoErr(err)
		is.Equal(target, e.consoleLog("hang")) // the file, never a pipe
	}
	is.NoErr(e.p.Start(ctx, "hang"))
	waitConsole(t, e.consoleLog("hang"), "guard-out", "guard-err")
	time.Sleep(100 * time.Millisecond)
	running := waitStatus(t, e.p, "hang", StatusRunning)
	is.Equal(running.Pid, st.Pid)
}

// testOrphan: the helper is killed between create and start. A fresh
// provider on the same root (the restarted helper) sees the container in
// created, with its annotations, and can clean it by exact id.
func testOrphan(t *testing.T, e *testEnv) {
	is := is.New(t)
	ctx := context.Background()
	first, err := New(e.name, e.cfg)
	is.NoErr(err)
	bundle := e.makeBundle(t, "orphan", ann("orphan"))
	is.NoErr(first.Create(ctx, CreateSpec{ID: "orphan", Bundle: bundle, ConsoleLog: e.consoleLog("orphan")}))
	first = nil // the helper "dies": nothing of it survives but the root
	fresh, err := New(e.name, e.cfg)
	is.NoErr(err)
	e.cleanup(t, fresh, "orphan")
	list, err := fresh.List(ctx)
	is.NoErr(err)
	is.Equal(len(list), 1)
	is.Equal(list[0].ID, "orphan")
	is.Equal(list[0].Status, StatusCreated)
	is.Equal(list[0].Annotations, ann("orphan"))
	is.NoErr(fresh.Delete(ctx, "orphan", true))
	list, err = fresh.List(ctx)
	is.NoErr(err)
	is.Equal(len(list), 0)
}

// testForeignRoot: a container in another root, even with the same id, is
// invisible to the provider and never touched by it. The foreign one is
// made through a second provider on another root: the same argv as running
// the runtime with --root elsewhere.
func testForeignRoot(t *testing.T, e *testEnv) {
	is := is.New(t)
	ctx := context.Background()
	foreign := newEnv(t, e.name)
	foreign.create(t, "same", nil)
	_, err := e.p.State(ctx, "same")
	wantCode(t, err, CodeNotFound)
	wantCode(t, e.p.Delete(ctx, "same", true), CodeNotFound)
	wantCode(t, e.p.Kill(ctx, "same", syscall.SIGKILL, true), CodeNotFound)
	wantCode(t, e.p.Start(ctx, "same"), CodeNotFound)
	list, err := e.p.List(ctx)
	is.NoErr(err)
	is.Equal(len(list), 0)
	st, err := foreign.p.State(ctx, "same")
	is.NoErr(err)
	is.Equal(st.Status, StatusCreated) // untouched
}

func testStatsPs(t *testing.T, e *testEnv) {
	is := is.New(t)
	ctx := context.Background()
	e.create(t, "usage", ann("usage"), "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exec sleep 600")
	is.NoErr(e.p.Start(ctx, "usage"))
	st := waitStatus(t, e.p, "usage", StatusRunning)
	pids, err := e.p.Ps(ctx, "usage")
	is.NoErr(err)
	is.True(slices.Contains(pids, st.Pid))
	s, err := e.p.Stats(ctx, "usage")
	is.NoErr(err)
	is.True(s.Pids >= 1)
	is.True(s.MemoryBytes > 0)
	is.True(s.CPUTotalNS > 0)
	is.NoErr(e.p.Kill(ctx, "usage", syscall.SIGKILL, true))
	waitStatus(t, e.p, "usage", StatusStopped)
	pids, err = e.p.Ps(ctx, "usage")
	is.NoErr(err)
	is.True(pids != nil)
	is.Equal(len(pids), 0)
	_, err = e.p.Stats(ctx, "usage")
	wantCode(t, err, CodeBadState)
}

func testBadState(t *testing.T, e *testEnv) {
	ctx := context.Background()
	e.create(t, "state", ann("state"))
	if err := e.p.Start(ctx, "state"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.p, "state", StatusRunning)
	wantCode(t, e.p.Start(ctx, "state"), CodeBadState)
	wantCode(t, e.p.Delete(ctx, "state", false), CodeBadState)
	if err := e.p.Kill(ctx, "state", syscall.SIGKILL, false); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e.p, "state", StatusStopped)
	wantCode(t, e.p.Kill(ctx, "state", syscall.SIGTERM, false), CodeBadState)
	wantCode(t, e.p.Start(ctx, "state"), CodeBadState)
}

func testInvalidArguments(t *testing.T, e *testEnv) {
	ctx := context.Background()
	before := e.procexecRuns()
	wantCode(t, e.p.Kill(ctx, "x", syscall.SIGWINCH, false), CodeInvalidArgument)
	wantCode(t, e.p.Kill(ctx, "x", syscall.Signal(0), false), CodeInvalidArgument)
	wantCode(t, e.p.Create(ctx, CreateSpec{ID: "x", Bundle: "rel/bundle", ConsoleLog: e.consoleLog("x")}), CodeInvalidArgument)
	wantCode(t, e.p.Create(ctx, CreateSpec{ID: "x", Bundle: "/b/../c", ConsoleLog: e.consoleLog("x")}), CodeInvalidArgument)
	wantCode(t, e.p.Create(ctx, CreateSpec{ID: "x", Bundle: "/b", ConsoleLog: ""}), CodeInvalidArgument)
	if n := e.procexecRuns() - before; n != 0 {
		t.Fatalf("%d commands ran", n)
	}
	link := filepath.Join(e.dir, "c", "link.log")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.p.Create(ctx, CreateSpec{ID: "x", Bundle: e.makeBundle(t, "x", nil, "true"), ConsoleLog: link}), CodeInvalidArgument)
}

// testRedaction: a runtime failure whose own message quotes a secret-looking
// value (here a rootfs path) reaches neither the error nor any log line:
// the runtime's --log message goes through the redaction policy and the
// scrubber like everything procexec logs.
func testRedaction(t *testing.T, e *testEnv) {
	is := is.New(t)
	ctx := context.Background()
	const canary = "Zq7canaryValue42"
	sc := redact.NewScrubber()
	sc.Register([]byte(canary))
	cfg := e.cfg
	cfg.Scrubber = sc
	p, err := New(e.name, cfg)
	is.NoErr(err)
	for _, dir := range []string{"token=hunter2hunter2", "x-" + canary} {
		// The rootfs path is missing: both runtimes fail and quote it.
		bundle := e.makeBundle(t, "redact", nil)
		cfgPath := filepath.Join(bundle, "config.json")
		b, err := os.ReadFile(cfgPath)
		is.NoErr(err)
		b = bytes.Replace(b, []byte(testRootfs(t)), []byte(filepath.Join(e.dir, dir, "rootfs")), 1)
		is.NoErr(os.WriteFile(cfgPath, b, 0o600))
		err = p.Create(ctx, CreateSpec{ID: "redact", Bundle: bundle, ConsoleLog: e.consoleLog("redact")})
		wantCode(t, err, CodeFailed)
		is.True(strings.Contains(err.Error(), e.dir)) // the runtime's own message is there, redacted
		for _, secret := range []string{"hunter2hunter2", canary} {
			is.True(!strings.Contains(err.Error(), secret))
			is.True(!strings.Contains(e.logs.String(), secret))
		}
	}
}
