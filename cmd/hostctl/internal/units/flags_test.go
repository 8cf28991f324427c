package units

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/matryer/is"
)

var reFlagLine = regexp.MustCompile(`^  -([a-z0-9-]+)`)

// binaryFlags runs binary -h and returns the flags it lists.
func binaryFlags(t *testing.T, binary string) map[string]bool {
	t.Helper()
	out, _ := exec.Command(filepath.Join(binDir, binary), "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if m := reFlagLine.FindStringSubmatch(line); m != nil {
			flags[m[1]] = true
		}
	}
	if !flags["root"] || !flags["layout"] {
		t.Fatalf("%s -h lists no -root or -layout; output:\n%s", binary, out)
	}
	return flags
}

// checkInvocation checks that every flag in args and every <PREFIX>_<FLAG>
// variable in env is one of binary's flags, then runs binary with them and
// -version: ff parses the whole command line and environment, so an
// unknown flag or a bad value fails it.
func checkInvocation(t *testing.T, binary string, args, env []string) {
	t.Helper()
	is := is.New(t)
	flags := binaryFlags(t, binary)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue // a value
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !flags[name] {
			t.Errorf("%s: flag -%s is not one of its flags", binary, name)
		}
	}
	prefix := binaries[binary] + "_"
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		name, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		flag := strings.ReplaceAll(strings.ToLower(name), "_", "-")
		if !flags[flag] {
			t.Errorf("%s: %s sets -%s, which is not one of its flags", binary, k, flag)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, binary), append(append([]string(nil), args...), "-version")...)
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v -version with %v: %v\n%s", binary, args, env, err, out)
	}
	is.Equal(strings.TrimSpace(string(out)), binary+" 0.1.0") // parsed, printed the version, exited 0
}

// cleanEnv is the test's environment without anything a daemon would read
// as one of its flags.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		skip := false
		for _, p := range binaries {
			if strings.HasPrefix(kv, p+"_") {
				skip = true
			}
		}
		if !skip {
			out = append(out, kv)
		}
	}
	return out
}

// TestUnitFlagsExist: every flag on each service's ExecStart= and every
// flag set through its Environment= exists in the binary (-h), and the
// binary accepts the whole set.
func TestUnitFlagsExist(t *testing.T) {
	t.Parallel()
	for _, s := range services {
		t.Run(s.unit, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			u := parseUnit(t, filepath.Join(repo, "systemd", s.unit))
			exec := strings.Fields(u.get("Service", "ExecStart"))
			is.True(len(exec) > 0)
			is.Equal(exec[0], "/usr/local/bin/"+s.binary) // the install path docs/operators.md uses
			var env []string
			for _, e := range u["Service"]["Environment"] {
				env = append(env, strings.Fields(e)...)
			}
			// Role users name system users the test machine lacks; the
			// -version run stops before resolving them, so keep them.
			checkInvocation(t, s.binary, exec[1:], env)
		})
	}
}

// plist is what the tests read from a rendered plist.
type plist struct {
	Label               string            `json:"Label"`
	ProgramArguments    []string          `json:"ProgramArguments"`
	EnvironmentVariable map[string]string `json:"EnvironmentVariables"`
	StandardErrorPath   string            `json:"StandardErrorPath"`
	AbandonProcessGroup bool              `json:"AbandonProcessGroup"`
	RunAtLoad           bool              `json:"RunAtLoad"`
	KeepAlive           map[string]bool   `json:"KeepAlive"`
}

// TestLaunchdRender renders the agents for the built binaries with
// launchd/render.sh, parses each with Python's plistlib, and checks the
// program path, the flags (against -h and a real parse), the per-user
// macOS paths and AbandonProcessGroup for supervisord.
func TestLaunchdRender(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	out := t.TempDir()
	home := "/Users/a&b <c>" // XML-special characters must survive rendering
	tmp := "/var/folders/x|y/T"
	cmd := exec.Command("/bin/sh", filepath.Join(repo, "launchd", "render.sh"), binDir, out)
	cmd.Env = append(os.Environ(), "HOSTKIT_HOME="+home, "HOSTKIT_TMPDIR="+tmp+"/")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("render.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"secretd", "egressd", "supervisord"} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			path := filepath.Join(out, "io.hostkit."+name+".plist")
			py := exec.Command("/usr/bin/python3", "-c",
				"import json, plistlib, sys\nwith open(sys.argv[1], 'rb') as f:\n    json.dump(plistlib.load(f), sys.stdout)", path)
			b, err := py.Output()
			if err != nil {
				t.Fatalf("plistlib %s: %v", path, err)
			}
			var p plist
			is.NoErr(json.Unmarshal(b, &p))
			is.Equal(p.Label, "io.hostkit."+name)
			is.Equal(p.ProgramArguments[0], filepath.Join(binDir, name))
			is.Equal(p.EnvironmentVariable["HOME"], home)
			is.Equal(p.EnvironmentVariable["TMPDIR"], tmp) // sockets under $TMPDIR/io.hostkit (docs/design.md, "Paths")
			is.Equal(p.StandardErrorPath, home+"/Library/Logs/io.hostkit/"+name+"/"+name+".log")
			is.True(p.RunAtLoad)
			is.Equal(p.KeepAlive["SuccessfulExit"], false) // restarted after a crash, not after a clean stop
			is.Equal(p.AbandonProcessGroup, name == "supervisord")
			checkInvocation(t, name, p.ProgramArguments[1:], nil)
		})
	}
	// A relative binary directory is refused; nothing is ever loaded.
	err := exec.Command("/bin/sh", filepath.Join(repo, "launchd", "render.sh"), "bin", t.TempDir()).Run()
	var ee *exec.ExitError
	is.True(err != nil)
	if e, ok := err.(*exec.ExitError); ok {
		ee = e
	}
	is.True(ee != nil && ee.Sys().(syscall.WaitStatus).ExitStatus() == 2) // usage error
}
