package provider

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/procexec"
	"hostkit.dev/lib/wire"
)

// Every code is listed in docs/protocol.md: codes are API.
func TestCodesDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes {
		if !bytes.Contains(doc, []byte("`"+c+"`")) {
			t.Errorf("docs/protocol.md does not list %s", c)
		}
	}
}

func TestCodesSortedUnique(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(Codes))
	is.Equal(len(slices.Compact(slices.Clone(Codes))), len(Codes))
	for _, c := range Codes {
		is.True(strings.HasPrefix(c, "provider.") || strings.HasPrefix(c, "container."))
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("/tmp", "hkp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	root, logs := filepath.Join(dir, "root"), filepath.Join(dir, "log")
	open := filepath.Join(dir, "open") // 0777 without the sticky bit
	if err := os.Mkdir(open, 0o700); err != nil || os.Chmod(open, 0o777) != nil {
		t.Fatal(err)
	}
	wide := filepath.Join(dir, "wide") // exists with the wrong mode
	if err := os.Mkdir(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, runtime string
		cfg           Config
		code          string
	}{
		{"unknown runtime", "podman", Config{Root: root, LogDir: logs}, CodeConfigInvalid},
		{"relative root", Runc, Config{Root: "root", LogDir: logs}, CodeConfigInvalid},
		{"unclean root", Runc, Config{Root: dir + "/x/../root", LogDir: logs}, CodeConfigInvalid},
		{"slash root", Runc, Config{Root: "/", LogDir: logs}, CodeConfigInvalid},
		{"no log dir", Runc, Config{Root: root}, CodeConfigInvalid},
		{"log dir inside root", Runc, Config{Root: root, LogDir: filepath.Join(root, "log")}, CodeConfigInvalid},
		{"root inside log dir", Runc, Config{Root: filepath.Join(logs, "r"), LogDir: logs}, CodeConfigInvalid},
		{"relative binary", Runc, Config{Root: root, LogDir: logs, Binary: "bin/runc"}, CodeConfigInvalid},
		{"timeout too short", Runc, Config{Root: root, LogDir: logs, Timeout: 1}, CodeConfigInvalid},
		{"root under a world-writable dir", Runc, Config{Root: filepath.Join(open, "root"), LogDir: logs}, CodeUnavailable},
		{"root with the wrong mode", Runc, Config{Root: wide, LogDir: logs}, CodeUnavailable},
		{"root through a symlink", Runc, Config{Root: filepath.Join(link, "root"), LogDir: logs}, CodeUnavailable},
		{"root is a symlink", Runc, Config{Root: link, LogDir: logs}, CodeUnavailable},
		{"missing binary", Runc, Config{Root: root, LogDir: logs, Binary: "/usr/sbin/no-such-runc"}, CodeUnavailable},
		{"unsafe binary", Crun, Config{Root: root, LogDir: logs, Binary: "/tmp/crun"}, CodeUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.runtime, tc.cfg)
			wantCode(t, err, tc.code)
			is.New(t).True(p == nil)
		})
	}
}

func TestNewMakesPrivateDirs(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	e := newEnv(t, Runc)
	for _, d := range []string{e.cfg.Root, e.cfg.LogDir} {
		fi, err := os.Lstat(d)
		is.NoErr(err)
		is.True(fi.IsDir())
		is.Equal(fi.Mode().Perm(), os.FileMode(0o700))
	}
	_, err := New(Runc, e.cfg) // existing and right: accepted again
	is.NoErr(err)
}

// The policy allows exactly the provider's command lines: anything else is
// refused by procexec before it runs, whatever the caller declares.
func TestPolicyRefusesOtherCommands(t *testing.T) {
	t.Parallel()
	for _, name := range runtimes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, name)
			p := e.p.(*cli)
			g := func(v ...string) []string { return append(globals(p.root, "/tmp/l"), v...) }
			ro, mut := procexec.ClassReadOnly, procexec.ClassMutating
			cases := []struct {
				name     string
				v        verb
				rt       []string
				class    procexec.Class
				mutation string
				code     string
			}{
				{"exec", verbState, g("exec", "c1", "sh"), ro, "", procexec.CodeUnknown},
				{"run", verbCreate, g("run", "c1"), mut, mutCreate, procexec.CodeUnknown},
				{"another root", verbList, append(globals("/run/runc", "/tmp/l"), "list", "--format", "json"), ro, "", procexec.CodeUnknown},
				{"no root", verbList, []string{"list", "--format", "json"}, ro, "", procexec.CodeUnknown},
				{"text log", verbState, []string{"--root", p.root, "--log", "/tmp/l", "--log-format", "text", "state", "c1"}, ro, "", procexec.CodeUnknown},
				{"events stream", verbEvents, g("events", "c1"), ro, "", procexec.CodeUnknown},
				{"SIGSTOP", verbKill, g("kill", "c1", "19"), mut, mutKill, procexec.CodeUnknown},
				{"signal by name", verbKill, g("kill", "c1", "KILL"), mut, mutKill, procexec.CodeUnknown},
				{"create through a shell", verbCreate, []string{"-c", "exec \"$@\"", "sh", p.t.runtime, "create", "c1"}, mut, mutCreate, procexec.CodeUnknown},
				{"create with extra flag", verbCreate, g("create", "--no-pivot", "--bundle", "/b", "--pid-file", "/p", "c1"), mut, mutCreate, procexec.CodeUnknown},
				{"state declared mutating", verbState, g("state", "c1"), mut, mutDelete, procexec.CodeInvalidSpec},
				{"delete declared read-only", verbDelete, g("delete", "c1"), ro, "", procexec.CodeInvalidSpec},
				{"kill declared as delete", verbKill, g("kill", "c1", "9"), mut, mutDelete, procexec.CodeInvalidSpec},
			}
			if name == Crun {
				cases = append(cases, struct {
					name     string
					v        verb
					rt       []string
					class    procexec.Class
					mutation string
					code     string
				}{"crun has no events", verbEvents, g("events", "--stats", "c1"), ro, "", procexec.CodeUnknown})
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					before := e.procexecRuns()
					exe, args := p.t.command(tc.v, tc.rt)
					if tc.name == "create through a shell" {
						exe, args = p.t.sh, tc.rt
					}
					res, err := p.runner.Run(context.Background(), &procexec.CommandSpec{Executable: exe, Args: args,
						Class: tc.class, Mutation: tc.mutation, Purpose: "policy test"})
					wantCode(t, err, tc.code)
					is.New(t).True(res == nil) // refused before execution
					is.New(t).Equal(e.procexecRuns()-before, 1)
					is.New(t).True(strings.Contains(e.logs.String(), `"outcome":"`+tc.code+`"`))
				})
			}
			// A shell with another script is not the wrapper.
			_, err := p.runner.Run(context.Background(), &procexec.CommandSpec{Executable: p.t.sh,
				Args: []string{"-c", "id", "hk-nocgroupv2", "/tmp/c", p.t.runtime}, Class: procexec.ClassReadOnly, Purpose: "policy test"})
			wantCode(t, err, procexec.CodeUnknown)
		})
	}
}

// The wrapper script is a constant and takes everything variable as
// positional parameters: a mount point or argument full of shell syntax is
// just a word.
func TestScriptsAreConstant(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(!strings.ContainsAny(scriptNoCgroupV2, "`\\")) // no command substitution or escapes
	is.True(strings.Contains(scriptNoCgroupV2, `exec "$@"`))
	tl := tools{runtime: "/r", sh: "/sh", unshare: "/u", umount: "/um", v2: "/sys/fs/cgroup/unified"}
	exe, args := tl.command(verbCreate, []string{"create", "--bundle", "/b/$(reboot)", "c1"})
	is.Equal(exe, "/u")
	is.Equal(args, []string{"--mount", "--propagation", "private", "--", "/sh", "-c", scriptNoCgroupV2, "hk-nocgroupv2",
		"/um", "/sys/fs/cgroup/unified", "/r", "create", "--bundle", "/b/$(reboot)", "c1"})
	exe, args = tl.command(verbState, []string{"state", "c1"}) // state and list stay unwrapped
	is.Equal(exe, "/r")
	is.Equal(args, []string{"state", "c1"})
}

func TestErrorsAreWireErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Runc)
	err := e.p.Start(context.Background(), "nope") // runs the runtime, which fails; state classifies
	we := wire.AsError(err)
	is := is.New(t)
	is.Equal(we.Code, CodeNotFound)
	is.True(strings.Contains(we.Msg, "no such container"))
	is.True(strings.Contains(we.Msg, "container does not exist")) // the runtime's own --log message
}
