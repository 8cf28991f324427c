package harness

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

// A test that hangs is killed at its timeout together with everything in
// its process group, and reported as timed out.
func TestExecGroupTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	script := filepath.Join(dir, "hang")
	is.NoErr(os.WriteFile(script, []byte("#!/bin/sh\nsleep 60 &\necho $! > "+pidFile+"\necho 'ok 1 - started'\nwait\n"), 0o700))
	start := time.Now()
	code, timedOut, err := execGroup(context.Background(), script, dir, testEnv,
		filepath.Join(dir, "out"), filepath.Join(dir, "err"), time.Second)
	is.NoErr(err)
	is.True(timedOut)
	is.True(code != 0)
	is.True(time.Since(start) < 10*time.Second)
	b, err := os.ReadFile(pidFile)
	is.NoErr(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	is.NoErr(err)
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	is.True(!alive(pid)) // the background child died with the group
	out, err := os.ReadFile(filepath.Join(dir, "out"))
	is.NoErr(err)
	is.Equal(string(out), "ok 1 - started\n") // stdout went to the file
}

// A test that ends normally reports its exit status; the environment is
// exactly the one given.
func TestExecGroupExit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "t")
	is.NoErr(os.WriteFile(script, []byte("#!/bin/sh\nenv | sort\nexit 3\n"), 0o700))
	code, timedOut, err := execGroup(context.Background(), script, dir, []string{"A=1", "PATH=/usr/bin:/bin"},
		filepath.Join(dir, "out"), filepath.Join(dir, "err"), 10*time.Second)
	is.NoErr(err)
	is.True(!timedOut)
	is.Equal(code, 3)
	out, err := os.ReadFile(filepath.Join(dir, "out"))
	is.NoErr(err)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasPrefix(l, "A=") && !strings.HasPrefix(l, "PATH=") && !strings.HasPrefix(l, "PWD=") && !strings.HasPrefix(l, "SHLVL=") && !strings.HasPrefix(l, "_=") {
			t.Errorf("unexpected environment entry %q", l)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A test whose run produced no check at all is run once more and judged by
// that second run alone (the first run's reason is kept); a test that runs
// no check twice still fails, and a test with checks runs once.
func TestZeroCheckRunOnceMore(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	// Each program counts its runs in <name>.runs beside it.
	tap := "1..1\nok 1 - the check\n"
	scripts := map[string]string{
		"flaky":  `[ -e "$0.runs" ] || { echo x >> "$0.runs"; echo 'runtime: transient' >&2; exit 1; }; echo x >> "$0.runs"; printf '` + tap + `'`,
		"silent": `echo x >> "$0.runs"; echo 'nothing to say' >&2; exit 1`,
		"steady": `echo x >> "$0.runs"; printf '` + tap + `'`,
	}
	s := &Suite{Name: "test", Bin: dir, Programs: map[string]string{}, FixedCgroup: map[string]bool{}}
	for name, body := range scripts {
		p := filepath.Join(dir, name)
		is.NoErr(os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755))
		s.Programs[name] = p
	}
	s.Tests = []string{"flaky", "silent", "steady"}
	p := &Provider{Name: "runc", Path: "/bin/true", Sh: "/bin/sh", Codec: "runc-1.1", HostKind: "cgroup-hybrid"}
	r, err := runProvider(context.Background(), Config{Timeout: 20 * time.Second, Parallel: 2}, s, p, filepath.Join(dir, "run"), io.Discard)
	is.NoErr(err)
	byName := map[string]TestResult{}
	for _, tr := range r.Tests {
		byName[tr.Name] = tr
		is.Equal(len(tr.Cleanup), 0) // nothing left behind by either run
	}
	runs := func(name string) int {
		b, err := os.ReadFile(filepath.Join(dir, name+".runs"))
		is.NoErr(err)
		return strings.Count(string(b), "x")
	}
	is.True(byName["flaky"].Passed) // judged by its second run
	is.True(!byName["flaky"].ZeroCheck)
	is.True(strings.Contains(byName["flaky"].RetriedAfter, "runtime: transient"))
	is.Equal(runs("flaky"), 2)
	is.True(!byName["silent"].Passed) // no check twice: still a failure
	is.True(byName["silent"].ZeroCheck)
	is.True(strings.Contains(byName["silent"].RetriedAfter, "nothing to say"))
	is.Equal(runs("silent"), 2)
	is.True(byName["steady"].Passed)
	is.Equal(byName["steady"].RetriedAfter, "")
	is.Equal(runs("steady"), 1)
}
