package daemon

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/rpc"
)

// testFlags is a daemon's flag set as Parse sees it: the common flags plus
// two of its own.
type testFlags struct {
	fs     *flag.FlagSet
	common Common
	listen string
	users  StringList
}

func newTestFlags() *testFlags {
	f := &testFlags{fs: flag.NewFlagSet("testd", flag.ContinueOnError)}
	f.fs.SetOutput(io.Discard)
	f.common.Register(f.fs)
	f.fs.StringVar(&f.listen, "proxy-listen", "127.0.0.1:4750", "")
	f.fs.Var(&f.users, "admin-users", "")
	return f
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestParsePrecedence sets environment variables, so it does not run in
// parallel.
func TestParsePrecedence(t *testing.T) {
	const prefix = "HKTESTD"
	tests := []struct {
		name        string
		args        []string          // after -root
		env         map[string]string // without the prefix
		configFile  string            // contents of an explicit -config file
		defaultFile string            // contents of <root>/etc/testd.conf; "" = absent
		wantListen  string
		wantLevel   string
		wantErr     bool
	}{
		{
			name:       "built-in default",
			wantListen: "127.0.0.1:4750",
			wantLevel:  "info",
		},
		{
			name:       "flag",
			args:       []string{"-proxy-listen", "127.0.0.1:1"},
			wantListen: "127.0.0.1:1",
			wantLevel:  "info",
		},
		{
			name:       "env with dash as underscore",
			env:        map[string]string{"PROXY_LISTEN": "127.0.0.1:2", "LOG_LEVEL": "debug"},
			wantListen: "127.0.0.1:2",
			wantLevel:  "debug",
		},
		{
			name:       "flag beats env",
			args:       []string{"-proxy-listen", "127.0.0.1:1"},
			env:        map[string]string{"PROXY_LISTEN": "127.0.0.1:2"},
			wantListen: "127.0.0.1:1",
			wantLevel:  "info",
		},
		{
			name:       "explicit config file",
			configFile: "proxy-listen 127.0.0.1:3\nlog-level warn\n",
			wantListen: "127.0.0.1:3",
			wantLevel:  "warn",
		},
		{
			name:       "env beats explicit config file",
			env:        map[string]string{"PROXY_LISTEN": "127.0.0.1:2"},
			configFile: "proxy-listen 127.0.0.1:3\nlog-level warn\n",
			wantListen: "127.0.0.1:2",
			wantLevel:  "warn",
		},
		{
			name:       "flag beats explicit config file",
			args:       []string{"-log-level", "error"},
			configFile: "log-level warn\n",
			wantListen: "127.0.0.1:4750",
			wantLevel:  "error",
		},
		{
			name:       "unknown flag in explicit config file",
			configFile: "no-such-flag 1\n",
			wantErr:    true,
		},
		{
			name:        "default config file applies when present",
			defaultFile: "# comment\nproxy-listen 127.0.0.1:4\nlog-level debug\n",
			wantListen:  "127.0.0.1:4",
			wantLevel:   "debug",
		},
		{
			name:        "flag beats default config file",
			args:        []string{"-proxy-listen", "127.0.0.1:1"},
			defaultFile: "proxy-listen 127.0.0.1:4\nlog-level debug\n",
			wantListen:  "127.0.0.1:1",
			wantLevel:   "debug",
		},
		{
			name:        "env beats default config file",
			env:         map[string]string{"LOG_LEVEL": "error"},
			defaultFile: "proxy-listen 127.0.0.1:4\nlog-level debug\n",
			wantListen:  "127.0.0.1:4",
			wantLevel:   "error",
		},
		{
			name:        "explicit config file replaces the default one",
			configFile:  "proxy-listen 127.0.0.1:3\n",
			defaultFile: "no-such-flag 1\nlog-level debug\n",
			wantListen:  "127.0.0.1:3",
			wantLevel:   "info",
		},
		{
			name:        "unknown flag in default config file",
			defaultFile: "no-such-flag 1\n",
			wantErr:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			for _, k := range []string{"ROOT", "CONFIG", "LOG_LEVEL", "VERSION", "PROXY_LISTEN", "ADMIN_USERS"} {
				t.Setenv(prefix+"_"+k, "")
			}
			for k, v := range tt.env {
				t.Setenv(prefix+"_"+k, v)
			}
			root := tmpRoot(t)
			args := append([]string{"-root", root}, tt.args...)
			if tt.configFile != "" {
				p := filepath.Join(root, "explicit.conf")
				writeFile(t, p, tt.configFile)
				args = append(args, "-config", p)
			}
			if tt.defaultFile != "" {
				writeFile(t, filepath.Join(root, "etc", "testd.conf"), tt.defaultFile)
			}
			f := newTestFlags()
			var out bytes.Buffer
			err := Parse(f.fs, &f.common, args, "testd", prefix, &out)
			if tt.wantErr {
				is.True(err != nil)
				return
			}
			is.NoErr(err)
			is.Equal(f.listen, tt.wantListen)
			is.Equal(f.common.LogLevel, tt.wantLevel)
			is.Equal(out.Len(), 0) // nothing printed
		})
	}
}

// TestParseRootFromEnv: -root itself may come from the environment, and
// then locates the default config file.
func TestParseRootFromEnv(t *testing.T) {
	is := is.New(t)
	root := tmpRoot(t)
	writeFile(t, filepath.Join(root, "etc", "testd.conf"), "proxy-listen 127.0.0.1:9\n")
	t.Setenv("HKTESTE_ROOT", root)
	f := newTestFlags()
	is.NoErr(Parse(f.fs, &f.common, nil, "testd", "HKTESTE", io.Discard))
	is.Equal(f.common.Root, root)
	is.Equal(f.listen, "127.0.0.1:9")
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	f := newTestFlags()
	var out bytes.Buffer
	err := Parse(f.fs, &f.common, []string{"-root", tmpRoot(t), "-version"}, "testd", "HKTESTV", &out)
	is.True(errors.Is(err, ErrVersionShown))
	is.Equal(out.String(), "testd "+Version+"\n")
}

func TestParseUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want error // nil: any error
	}{
		{"help", []string{"-h"}, flag.ErrHelp},
		{"unknown flag", []string{"-nope"}, nil},
		{"missing config file", []string{"-config", "/nonexistent/hk.conf"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			f := newTestFlags()
			args := append([]string{"-root", tmpRoot(t)}, tt.args...)
			err := Parse(f.fs, &f.common, args, "testd", "HKTESTU", io.Discard)
			is.True(err != nil)
			if tt.want != nil {
				is.True(errors.Is(err, tt.want))
			}
		})
	}
}

// TestMainExitStatus runs a daemon's Main in a child process: -h prints
// the usage and exits 0 with no error line; a command-line error exits 2;
// a failure after parsing exits 1; each failure names the binary.
func TestMainExitStatus(t *testing.T) {
	t.Parallel()
	root := tmpRoot(t)
	tests := []struct {
		name       string
		args       []string
		status     int
		wantErr    string // on stderr
		notWantErr string
	}{
		{"help", []string{"-h"}, 0, "-proxy-listen", "help requested"},
		{"unknown flag", []string{"-nope"}, 2, "testd: error parsing commandline arguments: flag provided but not defined: -nope", ""},
		{"bad value", []string{"-root", root, "-log-level", "loud"}, 2, "testd: -log-level: ", "start-up failed"},
		{"bad value from the environment", []string{"-root", root}, 2, "HKTESTM_VERSION", "start-up failed"},
		{"failure after parsing", []string{"-root", root, "-proxy-listen", "127.0.0.1:1"}, 1, "testd: listen 127.0.0.1:1: start-up failed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			cmd := exec.Command(os.Args[0], tt.args...)
			cmd.Env = append(os.Environ(), childEnv+"=main")
			if tt.name == "bad value from the environment" {
				cmd.Env = append(cmd.Env, "HKTESTM_VERSION=perhaps")
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			status := 0
			if ee, ok := err.(*exec.ExitError); ok {
				status = ee.ExitCode()
			} else {
				is.NoErr(err)
			}
			is.Equal(status, tt.status)
			is.True(strings.Contains(stderr.String(), tt.wantErr))
			if tt.notWantErr != "" {
				is.True(!strings.Contains(stderr.String(), tt.notWantErr))
			}
		})
	}
}

func TestCommonLevel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr bool
	}{
		{"debug", "debug", "DEBUG", false},
		{"upper case", "WARN", "WARN", false},
		{"error", "error", "ERROR", false},
		{"bogus", "loud", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			c := Common{LogLevel: tt.in}
			l, err := c.Level()
			if tt.wantErr {
				is.True(err != nil)
				return
			}
			is.NoErr(err)
			is.Equal(l.String(), tt.want)
		})
	}
}

func TestStringList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"none", nil, nil},
		{"one", []string{"-admin-users", "alice"}, []string{"alice"}},
		{"repeated", []string{"-admin-users", "alice", "-admin-users", "bob"}, []string{"alice", "bob"}},
		{"comma separated", []string{"-admin-users", "alice,bob"}, []string{"alice", "bob"}},
		{"mixed, spaces and empties", []string{"-admin-users", " alice , ,bob,", "-admin-users=1000"}, []string{"alice", "bob", "1000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			var l StringList
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.Var(&l, "admin-users", "")
			is.NoErr(fs.Parse(tt.args))
			is.Equal([]string(l), tt.want)
			if len(tt.want) > 0 {
				is.Equal(l.String(), strings.Join(tt.want, ","))
			}
		})
	}
}

func TestRoleFlags(t *testing.T) {
	t.Parallel()
	euid := uint32(os.Geteuid())
	root, err := user.LookupId("0")
	if err != nil {
		t.Fatalf("no user with uid 0 in the user database: %v", err)
	}
	tests := []struct {
		name    string
		args    []string
		want    rpc.Roles
		wantErr bool
	}{
		{
			name: "empty means own euid",
			want: rpc.Roles{"admin": {euid}, "stager": {euid}},
		},
		{
			name: "numeric uids, repeated and comma-separated",
			args: []string{"-admin-users", "1000,1001", "-admin-users", "4242"},
			want: rpc.Roles{"admin": {1000, 1001, 4242}, "stager": {euid}},
		},
		{
			name: "user names",
			args: []string{"-stager-users", root.Username + ",77"},
			want: rpc.Roles{"admin": {euid}, "stager": {0, 77}},
		},
		{
			name:    "unknown user",
			args:    []string{"-admin-users", "no-such-user-hk"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			resolve := RoleFlags(fs, "admin", "stager")
			is.NoErr(fs.Parse(tt.args))
			got, err := resolve()
			if tt.wantErr {
				is.True(err != nil)
				return
			}
			is.NoErr(err)
			is.Equal(got, tt.want)
		})
	}
}

func TestRoleFlagsFromEnv(t *testing.T) {
	is := is.New(t)
	t.Setenv("HKTESTR_ADMIN_USERS", "5,6")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c Common
	c.Register(fs)
	resolve := RoleFlags(fs, "admin")
	is.NoErr(Parse(fs, &c, []string{"-root", tmpRoot(t)}, "x", "HKTESTR", io.Discard))
	got, err := resolve()
	is.NoErr(err)
	is.Equal(got, rpc.Roles{"admin": {5, 6}})
}

// TestParseLayoutEnv: -layout has the environment form <PREFIX>_LAYOUT like
// every flag, and Common.ResolveLayout honours it. It sets environment
// variables, so it does not run in parallel.
func TestParseLayoutEnv(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("system layout is Linux only")
	}
	is := is.New(t)
	t.Setenv("HKTESTL_LAYOUT", "system")
	f := newTestFlags()
	is.NoErr(Parse(f.fs, &f.common, nil, "testd", "HKTESTL", io.Discard))
	is.Equal(f.common.LayoutMode, LayoutSystem)
	l, err := f.common.ResolveLayout()
	is.NoErr(err)
	is.Equal(l.Run, "/run/hostkit")
	is.Equal(l.ConfigFile("testd"), "/etc/hostkit/testd.conf") // the default config file of a unit

	f = newTestFlags()
	is.NoErr(Parse(f.fs, &f.common, []string{"-layout", "auto"}, "testd", "HKTESTL", io.Discard))
	is.Equal(f.common.LayoutMode, LayoutAuto) // the flag beats the environment
}
