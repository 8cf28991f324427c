package harness

import (
	"context"
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
