package harness

import (
	"context"
	"fmt"
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
func TestAttemptsUntilDecided(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	// Each program counts its runs in <name>.runs beside it and acts on
	// the count ($n, from 1): "blind" prints nothing and exits 1 (the
	// runtime failed before any check), "bad" prints a failing check,
	// "good" a passing one, "none" a plan of 1..0 and exits 0.
	prelude := `echo x >> "$0.runs"; n=$(wc -l < "$0.runs"); `
	acts := map[string]string{
		"blind": `echo 'runc create failed: cannot allocate memory' >&2; exit 1`,
		"bad":   `printf '1..1\nnot ok 1 - the check\n'`,
		"good":  `printf '1..1\nok 1 - the check\n'`,
		"none":  `printf '1..0\n'`,
	}
	seq := func(steps ...string) string { // step i for run i+1; the last repeats
		body := ""
		for i, st := range steps[:len(steps)-1] {
			body += fmt.Sprintf(`[ "$n" = %d ] && { %s; exit $?; }; `, i+1, acts[st])
		}
		return body + acts[steps[len(steps)-1]]
	}
	tests := []struct {
		name, program string
		runs          int
		passed, zero  bool
		earlier       string // in RetriedAfter
	}{
		{"steady", seq("good"), 1, true, false, ""},
		{"blind-once", seq("blind", "good"), 2, true, false, "cannot allocate memory"},
		{"blind-thrice", seq("blind", "blind", "blind", "good"), 4, true, false, "run 3: no TAP output"},
		{"blind-always", seq("blind"), maxBlindRuns, false, true, "run 3: no TAP output"},
		{"flip", seq("bad", "good"), 2, true, false, "run 1: 1 of 1 checks not ok"},
		// A test expected to pass is decided by its third failure.
		{"flip-late", seq("bad", "bad", "good"), 3, true, false, "run 2: 1 of 1 checks not ok"},
		{"bad-always", seq("bad"), failRunsPass, false, false, "run 2: 1 of 1 checks not ok"},
		{"none-always", seq("none"), failRunsPass, false, true, "zero checks ran"},
		{"blind-then-bad", seq("blind", "bad"), 1 + failRunsPass, false, false, "run 2: 1 of 1"},
		// One the expected-failure list names, by its second.
		{"listed_bad", seq("bad"), failRunsListed, false, false, "run 1: 1 of 1 checks not ok"},
		// The evidence of the one run that had any decides, not the blind runs after it.
		{"bad-then-blind", seq("bad", "blind"), 1 + maxBlindRuns, false, false, "run 4: no TAP output"},
	}
	s := &Suite{Name: "test", Bin: dir, Programs: map[string]string{}, FixedCgroup: map[string]bool{}}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.name)
		is.NoErr(os.WriteFile(p, []byte("#!/bin/sh\n"+prelude+tt.program+"\n"), 0o755))
		s.Programs[tt.name] = p
		s.Tests = append(s.Tests, tt.name)
	}
	p := &Provider{Name: "runc", Path: "/bin/true", Sh: "/bin/sh", Codec: "runc-1.1", HostKind: "cgroup-hybrid"}
	mod := filepath.Join(dir, "mod")
	is.NoErr(os.MkdirAll(filepath.Join(mod, "expected"), 0o755))
	is.NoErr(os.WriteFile(filepath.Join(mod, expectedPath(p.Codec, p.HostKind)), []byte("listed_bad # test: fails here\n"), 0o644))
	r, err := runProvider(context.Background(), Config{Timeout: 20 * time.Second, Parallel: 2, ModDir: mod}, s, p, filepath.Join(dir, "run"), io.Discard)
	is.NoErr(err)
	byName := map[string]TestResult{}
	for _, tr := range r.Tests {
		byName[tr.Name] = tr
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			b, err := os.ReadFile(filepath.Join(dir, tt.name+".runs"))
			is.NoErr(err)
			res := byName[tt.name]
			is.Equal(strings.Count(string(b), "x"), tt.runs) // runs
			is.Equal(res.Passed, tt.passed)
			is.Equal(res.ZeroCheck, tt.zero)
			is.Equal(len(res.Cleanup), 0)      // nothing left behind by any run
			is.Equal(res.Checks > 0, !tt.zero) // a decided failure with evidence keeps it
			if tt.earlier == "" {
				is.Equal(res.RetriedAfter, "")
			} else {
				is.True(strings.Contains(res.RetriedAfter, tt.earlier)) // earlier runs' reasons kept
			}
		})
	}
}
