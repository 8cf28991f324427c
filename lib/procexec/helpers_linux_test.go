package procexec

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"hostkit.dev/lib/redact"
)

// testRules classify the system tools the tests run.
var testRules = []Rule{
	{Executable: "/bin/sh", Args: []string{"-c", AnyArg, RestArgs}, Class: ClassReadOnly},
	{Executable: "/usr/bin/env", Class: ClassReadOnly},
	{Executable: "/usr/bin/ls", Args: []string{"-l", "/proc/self/fd/"}, Class: ClassReadOnly},
	{Executable: "/bin/sleep", Args: []string{AnyArg}, Class: ClassReadOnly},
	{Executable: "/usr/bin/touch", Args: []string{"--", AnyArg}, Class: ClassForbidden},
	{Executable: "/usr/bin/touch", Args: []string{"-a", AnyArg}, Class: ClassMutating, Mutation: "file.create"},
	{Executable: "/usr/bin/touch", Args: []string{"-c", AnyArg}, Class: ClassMutating, Mutation: "file.touch"},
	{Executable: "/usr/bin/touch", Args: []string{"-m", AnyArg}, Class: ClassReadOnly}, // a lie, for the mismatch case
}

// testMutations are the mutation kinds the test policy supports.
var testMutations = []string{"file.touch"}

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

// newTestRunner returns a Runner over testRules that logs JSON (without the
// redacting handler: the runner must redact by itself) into the returned
// buffer.
func newTestRunner(t *testing.T, sc *redact.Scrubber) (*Runner, *syncBuffer) {
	t.Helper()
	p, err := NewPolicy(testRules, testMutations)
	if err != nil {
		t.Fatalf("NewPolicy: %v", err)
	}
	buf := &syncBuffer{}
	r, err := NewRunner(Config{
		Policy:   p,
		Logger:   slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Scrubber: sc,
	})
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return r, buf
}

// sh returns a read-only spec running script with /bin/sh.
func sh(script string, args ...string) *CommandSpec {
	return &CommandSpec{
		Executable: "/bin/sh",
		Args:       append([]string{"-c", script, "sh"}, args...),
		Class:      ClassReadOnly,
		Purpose:    "test script",
	}
}

// secureBase returns a new directory whose whole path is owned by root and
// not writable by group or others (so Resolve accepts it), removed at the
// end of the test. Under /tmp (mode 1777) every path would be refused for
// /tmp itself, which would prove nothing; this needs root, as CI has.
func secureBase(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test needs root (it makes root-owned directories and chowns files); CI runs as root")
	}
	dir, err := os.MkdirTemp("/run", "hk-procexec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyExe copies src to dst with mode, creating dst's directory with
// dirMode.
func copyExe(t *testing.T, src, dst string, mode, dirMode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), dirMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(dst), dirMode); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
