package procexec

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// Caller-supplied output files: the child writes straight into them, the
// Result carries nothing for those streams, no limit applies, and the file
// stays open for the caller.
func TestCallerOutputFiles(t *testing.T) {
	t.Parallel()
	r, _ := newTestRunner(t, nil)
	open := func(t *testing.T, flags int) *os.File {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(t.TempDir(), "console.log"), flags|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	tests := []struct {
		name           string
		script         string
		flags          int
		out, err       bool // which streams go to the caller's file
		limit          int64
		file           string // what the file holds afterwards
		stdout, stderr string // what the Result holds
	}{
		{"both streams, one file", `echo out; echo err >&2`, os.O_WRONLY | os.O_APPEND, true, true, 0, "out\nerr\n", "", ""},
		{"read-write append", `echo out; echo err >&2`, os.O_RDWR | os.O_APPEND, true, true, 0, "out\nerr\n", "", ""},
		{"stdout only", `echo out; echo err >&2`, os.O_WRONLY | os.O_APPEND, true, false, 0, "out\n", "", "err\n"},
		{"stderr only", `echo out; echo err >&2`, os.O_WRONLY | os.O_APPEND, false, true, 0, "err\n", "out\n", ""},
		{"no limit on the caller's file", `head -c 5000 /dev/zero | tr '\0' x`, os.O_WRONLY | os.O_APPEND, true, true, 16, strings.Repeat("x", 5000), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			f := open(t, tt.flags)
			spec := sh(tt.script)
			spec.StdoutLimit, spec.StderrLimit = tt.limit, tt.limit
			if tt.out {
				spec.Stdout = f
			}
			if tt.err {
				spec.Stderr = f
			}
			res, err := r.Run(context.Background(), spec)
			is.NoErr(err)
			is.Equal(string(res.Stdout), tt.stdout)
			is.Equal(string(res.Stderr), tt.stderr)
			if tt.out {
				is.Equal(res.StdoutSize, int64(0))
			}
			b, err := os.ReadFile(f.Name())
			is.NoErr(err)
			is.Equal(string(b), tt.file)
			_, err = f.WriteString("still open\n") // the runner did not close it
			is.NoErr(err)
			assertGroupGone(t, res.Pid)
		})
	}
}

// A caller-supplied output file that is not an open, writable, O_APPEND
// regular file is refused before anything runs.
func TestCallerOutputFilesRefused(t *testing.T) {
	t.Parallel()
	r, _ := newTestRunner(t, nil)
	dir := t.TempDir()
	file := func(flags int) func(t *testing.T) *os.File {
		return func(t *testing.T) *os.File {
			f, err := os.OpenFile(filepath.Join(dir, "f"), flags|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}
	}
	tests := []struct {
		name   string
		file   func(t *testing.T) *os.File
		stderr bool
	}{
		{"not append", file(os.O_WRONLY), false},
		{"not append, stderr", file(os.O_RDWR), true},
		{"read-only append", file(os.O_RDONLY | os.O_APPEND), false},
		{"a directory", func(t *testing.T) *os.File {
			f, err := os.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, false},
		{"a character device", func(t *testing.T) *os.File {
			f, err := os.OpenFile(os.DevNull, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, true},
		{"a pipe", func(t *testing.T) *os.File {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pr.Close(); pw.Close() })
			return pw
		}, false},
		{"a closed file", func(t *testing.T) *os.File {
			f := file(os.O_WRONLY | os.O_APPEND)(t)
			f.Close()
			return f
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			marker := filepath.Join(t.TempDir(), "ran")
			spec := sh(`: > "$1"`, marker)
			if tt.stderr {
				spec.Stderr = tt.file(t)
			} else {
				spec.Stdout = tt.file(t)
			}
			res, err := r.Run(context.Background(), spec)
			is.Equal(wire.CodeOf(err), CodeInvalidSpec)
			is.True(res == nil)
			is.True(!exists(marker))
		})
	}
}

// The runner's output files are anonymous memory files: no name in any
// file system, nothing left behind.
func TestOutputFilesAnonymous(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r, _ := newTestRunner(t, nil)
	res, err := r.Run(context.Background(), sh(`readlink /proc/self/fd/1; readlink /proc/self/fd/2 >&2`))
	is.NoErr(err)
	is.Equal(strings.TrimSpace(string(res.Stdout)), "/memfd:hk-procexec-out (deleted)")
	is.Equal(strings.TrimSpace(string(res.Stderr)), "/memfd:hk-procexec-out (deleted)")
}

// Output written the ways shells and tools write it reaches the result:
// by reopening /dev/stdout (truncating or appending), through tee and dd;
// and moving the offset back cannot hide what was written.
func TestOutputReopenedAndRewound(t *testing.T) {
	t.Parallel()
	r, _ := newTestRunner(t, nil)
	tests := []struct {
		name, script, want string
		size               int64
		code               string
	}{
		{"> /dev/stdout", `echo hello > /dev/stdout`, "hello\n", 6, ""},
		{">> /dev/stdout", `echo a; echo b >> /dev/stdout`, "a\nb\n", 4, ""},
		{">> /dev/stdout between writes", `echo a; echo hello >> /dev/stdout; echo c`, "a\nhello\nc\n", 10, ""},
		{"> /dev/stdout between writes", `echo a; echo hello > /dev/stdout; echo c`, "hello\nc\n", 8, ""},
		{"> /dev/stderr twice", `echo one > /dev/stderr; echo two >> /dev/stderr; echo three`, "three\n", 6, ""},
		{"tee /dev/stderr", `echo hi | tee /dev/stderr >/dev/null; cat /dev/null`, "", 0, ""},
		{"dd of=/dev/stdout", `echo hi | dd of=/dev/stdout 2>/dev/null`, "hi\n", 3, ""},
		{"rewound after an overflow", `yes | head -c 100000; exec 3<>/dev/stdout; printf ok >&3`, "", 0, CodeOutputOverflow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			spec := sh(tt.script)
			spec.StdoutLimit = 4096
			res, err := r.Run(context.Background(), spec)
			is.Equal(wire.CodeOf(err), tt.code)
			if tt.code != "" {
				// The watcher may kill the script before or after its
				// rewind: either way the overflow is reported.
				is.True(res.StdoutSize > spec.StdoutLimit)
				return
			}
			is.Equal(res.StdoutSize, tt.size)
			is.Equal(string(res.Stdout), tt.want)
		})
	}
}
