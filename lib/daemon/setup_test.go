package daemon

import (
	"bytes"
	"errors"
	"flag"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestSetup(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := tmpRoot(t)
	fs := flag.NewFlagSet("containerization-helper", flag.ContinueOnError)
	var stdout, stderr bytes.Buffer
	env, err := Setup(fs, []string{"-root", root, "-log-level", "debug"}, "containerization-helper", NameHelper, "HKTESTSETUP", &stdout, &stderr)
	is.NoErr(err)
	is.Equal(env.Common.Root, root)
	is.Equal(env.Layout.Socket(NameHelper), filepath.Join(root, "run", "helper", "api.sock"))
	is.True(epochRE.MatchString(env.Epoch))
	is.True(!env.Started.IsZero())
	env.Logger.Debug("hello", "secret", "abcdefgh")
	lines := logLines(t, &stderr)
	is.Equal(len(lines), 1)
	is.Equal(lines[0][KeyDaemon], NameHelper)
	is.True(!strings.Contains(stderr.String(), "abcdefgh"))
	is.Equal(stdout.Len(), 0)
}

func TestSetupErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		target error // nil: any error
	}{
		{"version", []string{"-version"}, ErrVersionShown},
		{"help", []string{"-h"}, flag.ErrHelp},
		{"bad log level", []string{"-log-level", "loud"}, nil},
		{"bad layout", []string{"-layout", "global"}, nil},
		{"root with layout system", []string{"-layout", "system"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			fs := flag.NewFlagSet("secretd", flag.ContinueOnError)
			var stdout, stderr bytes.Buffer
			args := append([]string{"-root", tmpRoot(t)}, tt.args...)
			env, err := Setup(fs, args, "secretd", NameSecretd, "HKTESTSETUPE", &stdout, &stderr)
			is.True(err != nil)
			is.True(env == nil)
			if tt.target != nil {
				is.True(errors.Is(err, tt.target))
			}
		})
	}
}

// TestSetupLayoutSystem: -layout system gives the Linux system paths to a
// daemon whatever its euid (a unit's own user), without creating anything.
func TestSetupLayoutSystem(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("system layout is Linux only")
	}
	is := is.New(t)
	fs := flag.NewFlagSet("secretd", flag.ContinueOnError)
	var stdout, stderr bytes.Buffer
	env, err := Setup(fs, []string{"-layout", "system"}, "secretd", NameSecretd, "HKTESTSETUPL", &stdout, &stderr)
	is.NoErr(err)
	is.Equal(env.Common.LayoutMode, LayoutSystem)
	is.Equal(env.Layout.Socket(NameSecretd), "/run/hostkit/secretd/api.sock")
	is.Equal(env.Layout.StateDir(NameSecretd), "/var/lib/hostkit/secretd")
	is.Equal(env.Layout.LogDir(NameSecretd), "/var/log/hostkit/secretd")
	is.Equal(env.Layout.ConfigFile("secretd"), "/etc/hostkit/secretd.conf")
}
