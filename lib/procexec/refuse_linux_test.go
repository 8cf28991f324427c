package procexec

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// Specs that must not run are refused before anything is executed: each
// would create a marker file if it ran.
func TestRefusedBeforeExecution(t *testing.T) {
	t.Parallel()
	r, _ := newTestRunner(t, nil)
	closed, err := OpenWorkDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	touch := func(m func(*CommandSpec), args ...string) func(string) *CommandSpec {
		return func(marker string) *CommandSpec {
			s := &CommandSpec{Executable: "/usr/bin/touch", Args: append(args, marker), Class: ClassReadOnly, Purpose: "touch marker"}
			if m != nil {
				m(s)
			}
			return s
		}
	}
	tests := []struct {
		name string
		spec func(marker string) *CommandSpec
		code string
	}{
		{"forbidden by policy", touch(nil, "--"), CodeForbidden},
		{"declared forbidden", touch(func(s *CommandSpec) { s.Class = ClassForbidden }, "-m"), CodeForbidden},
		{"no rule matches", touch(nil), CodeUnknown},
		{"declared unknown", touch(func(s *CommandSpec) { s.Class = ClassUnknown }, "-m"), CodeUnknown},
		{"zero class is unknown", touch(func(s *CommandSpec) { s.Class = "" }, "-m"), CodeUnknown},
		{"unsupported mutation", touch(func(s *CommandSpec) { s.Class, s.Mutation = ClassMutating, "file.create" }, "-a"), CodeUnsupportedMutation},
		{"declared class differs", touch(func(s *CommandSpec) { s.Class, s.Mutation = ClassMutating, "file.create" }, "-m"), CodeInvalidSpec},
		{"declared kind differs", touch(func(s *CommandSpec) { s.Class, s.Mutation = ClassMutating, "file.create" }, "-c"), CodeInvalidSpec},
		{"unresolved executable", touch(func(s *CommandSpec) { s.Executable = "/nonexistent/touch" }, "-m"), CodeUnresolved},
		{"relative executable", touch(func(s *CommandSpec) { s.Executable = "./touch" }, "-m"), CodeUnresolved},
		{"timeout too short", touch(func(s *CommandSpec) { s.Timeout = 500 * time.Millisecond }, "-m"), CodeInvalidSpec},
		{"timeout too long", touch(func(s *CommandSpec) { s.Timeout = 301 * time.Second }, "-m"), CodeInvalidSpec},
		{"negative limit", touch(func(s *CommandSpec) { s.StderrLimit = -1 }, "-m"), CodeInvalidSpec},
		{"limit too large", touch(func(s *CommandSpec) { s.StdoutLimit = MaxOutputLimit + 1 }, "-m"), CodeInvalidSpec},
		{"no purpose", touch(func(s *CommandSpec) { s.Purpose = "" }, "-m"), CodeInvalidSpec},
		{"env without =", touch(func(s *CommandSpec) { s.Env = []string{"NOVALUE"} }, "-m"), CodeInvalidSpec},
		{"env repeats a key", touch(func(s *CommandSpec) { s.Env = []string{"A=1", "A=2"} }, "-m"), CodeInvalidSpec},
		{"nul in argument", touch(func(s *CommandSpec) { s.Args = append(s.Args, "x\x00y") }, "-m"), CodeInvalidSpec},
		{"mutation on read-only", touch(func(s *CommandSpec) { s.Mutation = "file.touch" }, "-m"), CodeInvalidSpec},
		{"closed working directory", touch(func(s *CommandSpec) { s.Dir = closed }, "-m"), CodeWorkDirInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			marker := filepath.Join(t.TempDir(), "ran")
			res, err := r.Run(context.Background(), tt.spec(marker))
			is.Equal(wire.CodeOf(err), tt.code)
			is.True(res == nil)
			is.True(!exists(marker)) // nothing ran
		})
	}

	t.Run("control: an allowed spec does run", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		marker := filepath.Join(t.TempDir(), "ran")
		_, err := r.Run(context.Background(), touch(nil, "-m")(marker))
		is.NoErr(err)
		is.True(exists(marker))
		marker2 := filepath.Join(t.TempDir(), "ran")
		_, err = r.Run(context.Background(), touch(func(s *CommandSpec) { s.Class, s.Mutation = ClassMutating, "file.touch" }, "-c")(marker2))
		is.NoErr(err)
		is.True(!exists(marker2)) // touch -c creates nothing: the supported mutation ran
	})
}

func TestCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r, _ := newTestRunner(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	marker := filepath.Join(t.TempDir(), "ran")
	res, err := r.Run(ctx, sh(`: > "$1"`, marker))
	is.Equal(wire.CodeOf(err), CodeCancelled)
	is.Equal(err.(*wire.Error).Retry, wire.RetrySafe)
	is.True(res == nil)
	is.True(!exists(marker))
}

func TestNewRunnerNeedsPolicy(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	_, err := NewRunner(Config{})
	is.Equal(wire.CodeOf(err), CodeInvalidSpec)
}

// An executable that is not root-owned or is writable by others (or sits in
// such a directory) is refused, by Resolve and by Run, before it runs.
func TestResolve(t *testing.T) {
	t.Parallel()
	base := secureBase(t)
	touchExe, err := Resolve("/usr/bin/touch")
	if err != nil {
		t.Fatal(err)
	}
	trueExe, err := Resolve("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	mk := func(rel string, mode, dirMode os.FileMode) string {
		p := filepath.Join(base, rel)
		copyExe(t, touchExe, p, mode, dirMode)
		return p
	}
	chown := func(p string) string {
		if err := os.Lchown(p, 65533, 65533); err != nil {
			t.Fatal(err)
		}
		return p
	}
	symlink := func(target, rel string) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	okExe := mk("ok/touch", 0o755, 0o755)
	worldDir := mk("world/touch", 0o755, 0o777)
	groupDir := mk("group/touch", 0o755, 0o775)
	foreignDirExe := mk("foreign/touch", 0o755, 0o755)
	chown(filepath.Dir(foreignDirExe))
	foreignFile := chown(mk("foreignfile/touch", 0o755, 0o755))
	groupFile := mk("groupfile/touch", 0o775, 0o755)
	worldFile := mk("worldfile/touch", 0o757, 0o755)
	noExec := mk("noexec/touch", 0o644, 0o755)
	linkUnsafe := symlink("../world/touch", "links/unsafe")
	linkSafe := symlink(trueExe, "links/safe")
	linkDirUnsafe := symlink(filepath.Join(base, "world"), "links/dir")
	symlink("b", "loop/a")
	symlink("a", "loop/b")

	tests := []struct {
		name string
		exe  string
		want string // resolved path, when code is ""
		code string
	}{
		{"root-owned copy", okExe, okExe, ""},
		{"symlink to a safe file", linkSafe, trueExe, ""},
		{"system symlink /bin/sh", "/bin/sh", mustEval(t, "/bin/sh"), ""},
		{"bare name", "true", trueExe, ""},
		{"dot and dotdot", filepath.Join(base, "ok/../ok/./touch"), okExe, ""},
		{"world-writable directory", worldDir, "", CodeExecutableUnsafe},
		{"group-writable directory", groupDir, "", CodeExecutableUnsafe},
		{"directory owned by 65533", foreignDirExe, "", CodeExecutableUnsafe},
		{"file owned by 65533", foreignFile, "", CodeExecutableUnsafe},
		{"group-writable file", groupFile, "", CodeExecutableUnsafe},
		{"world-writable file", worldFile, "", CodeExecutableUnsafe},
		{"symlink into an unsafe directory", linkUnsafe, "", CodeExecutableUnsafe},
		{"symlinked directory that is unsafe", filepath.Join(linkDirUnsafe, "touch"), "", CodeExecutableUnsafe},
		{"under /tmp", filepath.Join(t.TempDir(), "touch"), "", CodeExecutableUnsafe},
		{"not executable", noExec, "", CodeUnresolved},
		{"a directory", filepath.Join(base, "ok"), "", CodeUnresolved},
		{"file used as a directory", filepath.Join(okExe, "x"), "", CodeUnresolved},
		{"missing", filepath.Join(base, "missing"), "", CodeUnresolved},
		{"symlink loop", filepath.Join(base, "loop/a"), "", CodeUnresolved},
		{"relative", "ok/touch", "", CodeUnresolved},
		{"bare name not found", "hk-no-such-tool", "", CodeUnresolved},
		{"empty", "", "", CodeUnresolved},
	}
	r, _ := newTestRunner(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := Resolve(tt.exe)
			is.Equal(wire.CodeOf(err), tt.code)
			is.Equal(got, tt.want)
			if tt.code == "" {
				return
			}
			// Run refuses it too, before classification and execution.
			marker := filepath.Join(t.TempDir(), "ran")
			res, err := r.Run(context.Background(), &CommandSpec{
				Executable: tt.exe, Args: []string{marker}, Class: ClassReadOnly, Purpose: "unsafe touch",
			})
			is.Equal(wire.CodeOf(err), tt.code)
			is.True(res == nil)
			is.True(!exists(marker))
		})
	}

	t.Run("the safe copy runs", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		p, err := NewPolicy([]Rule{{Executable: okExe, Args: []string{AnyArg}, Class: ClassReadOnly}}, nil)
		is.NoErr(err)
		r, err := NewRunner(Config{Policy: p})
		is.NoErr(err)
		marker := filepath.Join(t.TempDir(), "ran")
		res, err := r.Run(context.Background(), &CommandSpec{Executable: okExe, Args: []string{marker}, Class: ClassReadOnly, Purpose: "safe touch"})
		is.NoErr(err)
		is.Equal(res.ExitCode, 0)
		is.True(exists(marker))
	})
}

// mustEval returns the symlink-free form of p.
func mustEval(t *testing.T, p string) string {
	t.Helper()
	out, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
