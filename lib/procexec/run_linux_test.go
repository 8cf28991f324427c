package procexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

func TestRunOutputAndExit(t *testing.T) {
	t.Parallel()
	r, _ := newTestRunner(t, nil)
	tests := []struct {
		name           string
		spec           *CommandSpec
		code           string
		exit           int
		signal         string
		stdout, stderr string
	}{
		{"stdout and stderr apart", sh(`echo out; echo err >&2`), "", 0, "", "out\n", "err\n"},
		{"argv is exact", sh(`for a in "$0" "$@"; do printf '[%s]\n' "$a"; done`, "", "two words", "*", "$HOME", "-c"),
			"", 0, "", "[sh]\n[]\n[two words]\n[*]\n[$HOME]\n[-c]\n", ""},
		{"stdin is /dev/null", sh(`cat; readlink /proc/self/fd/0`), "", 0, "", "/dev/null\n", ""},
		{"nonzero exit", sh(`echo oops >&2; exit 3`), CodeExitNonzero, 3, "", "", "oops\n"},
		{"killed by its own signal", sh(`kill -TERM $$`), CodeExitNonzero, -1, "SIGTERM", "", ""},
		{"default working directory is /", sh(`pwd -P`), "", 0, "", "/\n", ""},
		{"output exactly at the limit", func() *CommandSpec { s := sh(`printf abcd`); s.StdoutLimit = 4; return s }(), "", 0, "", "abcd", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			res, err := r.Run(context.Background(), tt.spec)
			is.Equal(wire.CodeOf(err), tt.code)
			is.True(res != nil)
			is.Equal(res.ExitCode, tt.exit)
			is.Equal(res.Signal, tt.signal)
			is.Equal(string(res.Stdout), tt.stdout)
			is.Equal(string(res.Stderr), tt.stderr)
			is.Equal(res.StdoutSize, int64(len(tt.stdout)))
			is.True(res.Duration > 0)
			is.True(strings.Contains(res.Summary, `purpose="test script"`))
			if tt.code == CodeExitNonzero && tt.stderr != "" {
				is.True(strings.Contains(err.Error(), strings.TrimSpace(tt.stderr))) // a redacted tail
				is.Equal(err.(*wire.Error).Retry, wire.RetryAfterObserve)
			}
			assertGroupGone(t, res.Pid)
		})
	}
}

// The timeout and the caller's context both kill the whole process group,
// and are reported distinctly.
func TestKillsWholeGroup(t *testing.T) {
	t.Parallel()
	r, _ := newTestRunner(t, nil)
	const script = `sleep 100 & sleep 100 & echo started; wait`
	tests := []struct {
		name    string
		timeout time.Duration
		ctx     func() (context.Context, context.CancelFunc)
		code    string
		min     time.Duration
	}{
		{"timeout", time.Second, func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			CodeTimeout, time.Second},
		{"cancel", 30 * time.Second, func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}, CodeCancelled, 300 * time.Millisecond},
		{"caller's deadline is a cancellation", 30 * time.Second, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, CodeCancelled, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			begin := time.Now()
			ctx, cancel := tt.ctx()
			defer cancel()
			spec := sh(script)
			spec.Timeout = tt.timeout
			res, err := r.Run(ctx, spec)
			is.Equal(wire.CodeOf(err), tt.code)
			is.True(!errors.Is(err, &wire.Error{Code: map[string]string{CodeTimeout: CodeCancelled, CodeCancelled: CodeTimeout}[tt.code]}))
			is.True(res != nil)
			is.Equal(res.Signal, "SIGKILL")
			is.Equal(string(res.Stdout), "started\n")
			is.True(time.Since(begin) >= tt.min)
			is.True(time.Since(begin) < 10*time.Second)
			assertGroupGone(t, res.Pid)
		})
	}
}

// A program that exits normally but leaves processes in its group: they are
// killed, and no process of the group remains.
func TestLeftoversKilled(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r, _ := newTestRunner(t, nil)
	res, err := r.Run(context.Background(), sh(`sleep 100 & sleep 100 & echo left`))
	is.NoErr(err)
	is.Equal(string(res.Stdout), "left\n")
	assertGroupGone(t, res.Pid)
}

func TestOutputOverflow(t *testing.T) {
	t.Parallel()
	r, _ := newTestRunner(t, nil)
	tests := []struct {
		name   string
		script string
		stdout bool
	}{
		{"stdout, finished", `yes | head -c 10M`, true},
		{"stderr, finished", `yes | head -c 10M >&2`, false},
		{"stdout, endless: the watcher kills", `yes`, true},
		{"stderr, endless, with children", `sleep 100 & yes >&2`, false},
		{"stdout, one write far past the cap", `yes | head -c 100000 | dd bs=100000 iflag=fullblock 2>/dev/null`, true},
		{"stdout, one byte over", `yes | head -c 1025`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			spec := sh(tt.script)
			spec.StdoutLimit, spec.StderrLimit = 1024, 1024
			spec.Timeout = 60 * time.Second
			begin := time.Now()
			res, err := r.Run(context.Background(), spec)
			is.Equal(wire.CodeOf(err), CodeOutputOverflow)
			is.True(res != nil)
			out, size := res.Stdout, res.StdoutSize
			if !tt.stdout {
				out, size = res.Stderr, res.StderrSize
			}
			is.Equal(len(out), 1024)
			is.True(size > 1024)
			is.Equal(string(out[:4]), "y\ny\n")
			is.True(time.Since(begin) < 30*time.Second)
			assertGroupGone(t, res.Pid)
		})
	}
}

// Output exactly at the limit is whole and not an overflow.
func TestOutputAtLimit(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r, _ := newTestRunner(t, nil)
	spec := sh(`yes | head -c 1024; yes | head -c 1024 >&2`)
	spec.StdoutLimit, spec.StderrLimit = 1024, 1024
	res, err := r.Run(context.Background(), spec)
	is.NoErr(err)
	is.Equal(len(res.Stdout), 1024)
	is.Equal(res.StdoutSize, int64(1024))
	is.Equal(res.StderrSize, int64(1024))
}

// The child's environment is exactly the given list.
func TestEnvExact(t *testing.T) {
	t.Setenv("HK_PROCEXEC_PARENT", "inherited") // must not reach the child (no t.Parallel: Setenv)
	r, _ := newTestRunner(t, nil)
	tests := []struct {
		name string
		env  []string
	}{
		{"nil", nil},
		{"empty", []string{}},
		{"given", []string{"A=1", "PATH=/usr/bin", "SPACED=two words", "EMPTY="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			res, err := r.Run(context.Background(), &CommandSpec{Executable: "/usr/bin/env", Env: tt.env, Class: ClassReadOnly, Purpose: "print env"})
			is.NoErr(err)
			var got []string
			if s := strings.TrimSuffix(string(res.Stdout), "\n"); s != "" {
				got = strings.Split(s, "\n")
			}
			is.Equal(len(got), len(tt.env))
			for i := range got {
				is.Equal(got[i], tt.env[i])
			}
		})
	}
}

// The child holds only descriptors 0, 1 and 2 (and the one ls opens to
// list them), even when this process has a descriptor without
// close-on-exec.
func TestNoInheritedDescriptors(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r, _ := newTestRunner(t, nil)
	leakName := filepath.Join(t.TempDir(), "hk-leaked-descriptor")
	leak, err := os.Create(leakName)
	is.NoErr(err)
	defer leak.Close()
	_, err = unix.FcntlInt(leak.Fd(), unix.F_SETFD, 0) // clear FD_CLOEXEC: a leak waiting to happen
	is.NoErr(err)
	wd, err := OpenWorkDir(t.TempDir())
	is.NoErr(err)
	defer wd.Close()

	res, err := r.Run(context.Background(), &CommandSpec{
		Executable: "/usr/bin/ls", Args: []string{"-l", "/proc/self/fd/"}, Dir: wd,
		Class: ClassReadOnly, Purpose: "list descriptors",
	})
	is.NoErr(err)
	fds := map[string]string{}
	for line := range strings.Lines(string(res.Stdout)) {
		left, target, ok := strings.Cut(strings.TrimSpace(line), " -> ")
		if !ok {
			continue
		}
		f := strings.Fields(left)
		fds[f[len(f)-1]] = target
	}
	keys := make([]string, 0, len(fds))
	for k := range fds {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	is.Equal(keys, []string{"0", "1", "2", "3"})
	is.Equal(fds["0"], "/dev/null")
	is.True(strings.HasPrefix(fds["3"], "/proc/")) // ls's own directory handle
	is.True(!strings.Contains(string(res.Stdout), "hk-leaked-descriptor"))
	is.True(!strings.Contains(string(res.Stdout), wd.Path()))
}

// runc is installed by scripts/setup: its absence is a failure, not a skip.
func TestRuncVersion(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	p, err := NewPolicy([]Rule{{Executable: "/usr/sbin/runc", Args: []string{"--version"}, Class: ClassReadOnly}}, nil)
	if err != nil {
		t.Fatalf("runc must be installed at /usr/sbin/runc (scripts/setup): %v", err)
	}
	r, err := NewRunner(Config{Policy: p})
	is.NoErr(err)
	res, err := r.Run(context.Background(), &CommandSpec{
		Executable: "/usr/sbin/runc", Args: []string{"--version"}, Class: ClassReadOnly, Purpose: "runc version",
	})
	is.NoErr(err)
	is.Equal(res.ExitCode, 0)
	is.True(strings.HasPrefix(string(res.Stdout), "runc version "))
	assertGroupGone(t, res.Pid)
}
