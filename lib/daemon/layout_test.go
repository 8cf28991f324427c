package daemon

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"golang.org/x/sys/unix"
)

func TestRootLayout(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, err := RootLayout("/srv/hk")
	is.NoErr(err)
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"socket secretd", l.Socket(NameSecretd), "/srv/hk/run/secretd/api.sock"},
		{"socket helper", l.Socket(NameHelper), "/srv/hk/run/helper/api.sock"},
		{"public", l.Public, "/srv/hk/run/public"},
		{"state", l.StateDir(NameEgressd), "/srv/hk/state/egressd"},
		{"log", l.LogDir(NameSupervisord), "/srv/hk/log/supervisord"},
		{"config", l.ConfigFile("containerization-helper"), "/srv/hk/etc/containerization-helper.conf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(tt.got, tt.want)
		})
	}
}

func TestRootLayoutRelative(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, err := RootLayout("rel/dir")
	is.NoErr(err)
	wd, err := os.Getwd()
	is.NoErr(err)
	is.Equal(l.Socket(NameSecretd), filepath.Join(wd, "rel/dir/run/secretd/api.sock")) // made absolute
	for _, p := range []string{l.Run, l.Public, l.State, l.Log, l.Config} {
		is.True(filepath.IsAbs(p))
	}
}

func TestDefaultLayout(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("Linux paths; macOS uses TMPDIR and ~/Library")
	}
	system := Layout{Run: "/run/hostkit", Public: "/run/hostkit/public", State: "/var/lib/hostkit", Log: "/var/log/hostkit", Config: "/etc/hostkit"}
	tests := []struct {
		name    string
		euid    int
		env     map[string]string
		want    Layout
		wantErr bool
	}{
		{
			name: "root uses system paths",
			euid: 0,
			env:  map[string]string{"XDG_RUNTIME_DIR": "/run/user/0", "HOME": "/root"},
			want: system,
		},
		{
			name: "root without any env",
			euid: 0,
			want: system,
		},
		{
			name: "user with XDG vars",
			euid: 1000,
			env:  map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/home/u/st", "HOME": "/home/u"},
			want: Layout{Run: "/run/user/1000/hostkit", Public: "/run/user/1000/hostkit/public", State: "/home/u/st/hostkit", Log: "/home/u/st/hostkit/log"},
		},
		{
			name: "user falls back to HOME for state",
			euid: 1000,
			env:  map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/u"},
			want: Layout{Run: "/run/user/1000/hostkit", Public: "/run/user/1000/hostkit/public", State: "/home/u/.local/state/hostkit", Log: "/home/u/.local/state/hostkit/log"},
		},
		{
			name:    "user without XDG_RUNTIME_DIR",
			euid:    1000,
			env:     map[string]string{"XDG_STATE_HOME": "/home/u/st", "HOME": "/home/u"},
			wantErr: true,
		},
		{
			name:    "user without XDG_STATE_HOME or HOME",
			euid:    1000,
			env:     map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			getenv := func(k string) string { return tt.env[k] }
			got, err := DefaultLayout(getenv, tt.euid)
			if tt.wantErr {
				is.True(err != nil)
				return
			}
			is.NoErr(err)
			is.Equal(got, tt.want)
		})
	}
}

func TestDefaultLayoutUserPaths(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("Linux paths")
	}
	is := is.New(t)
	env := map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/home/u/st"}
	l, err := DefaultLayout(func(k string) string { return env[k] }, 1000)
	is.NoErr(err)
	// docs/design.md, "Paths": the Linux user column.
	is.Equal(l.Socket(NameEgressd), "/run/user/1000/hostkit/egressd/api.sock")
	is.Equal(l.StateDir(NameEgressd), "/home/u/st/hostkit/egressd")
	is.Equal(l.LogDir(NameEgressd), "/home/u/st/hostkit/log/egressd")
	is.Equal(l.ConfigFile("egressd"), "") // flags / env only
}

func TestResolveLayoutRoot(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	got, err := ResolveLayout("/srv/x")
	is.NoErr(err)
	want, err := RootLayout("/srv/x")
	is.NoErr(err)
	is.Equal(got, want)
}

// TestEnsurePublic changes the process umask, so it does not run in
// parallel.
func TestEnsurePublic(t *testing.T) {
	tests := []struct {
		name  string
		umask int
	}{
		{"umask 077", 0o077},
		{"umask 027", 0o027},
		{"umask 022", 0o022},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			old := syscall.Umask(tt.umask)
			defer syscall.Umask(old)
			root := filepath.Join(tmpRoot(t), "r")
			l, err := RootLayout(root)
			is.NoErr(err)
			is.NoErr(l.EnsurePublic())
			for _, d := range []string{root, l.Run, l.Public} {
				fi, err := os.Stat(d)
				is.NoErr(err)
				is.True(fi.IsDir())
				is.Equal(fi.Mode().Perm(), os.FileMode(0o755)) // d
			}
			// Again, after someone tightened them: modes are restored.
			is.NoErr(os.Chmod(l.Public, 0o700))
			is.NoErr(os.Chmod(l.Run, 0o700))
			is.NoErr(l.EnsurePublic())
			for _, d := range []string{l.Run, l.Public} {
				fi, err := os.Stat(d)
				is.NoErr(err)
				is.Equal(fi.Mode().Perm(), os.FileMode(0o755))
			}
		})
	}
}

func TestEnsurePublicKeepsExistingParent(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	parent := filepath.Join(tmpRoot(t), "xdg")
	is.NoErr(os.Mkdir(parent, 0o700))
	is.NoErr(os.Chmod(parent, 0o700))
	l := Layout{Run: filepath.Join(parent, "hostkit"), Public: filepath.Join(parent, "hostkit", "public")}
	is.NoErr(l.EnsurePublic())
	fi, err := os.Stat(parent)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o700)) // $XDG_RUNTIME_DIR keeps its mode
	fi, err = os.Stat(l.Public)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o755))
}

func TestLayoutMode(t *testing.T) {
	t.Parallel()
	system := Layout{Run: "/run/hostkit", Public: "/run/hostkit/public", State: "/var/lib/hostkit", Log: "/var/log/hostkit", Config: "/etc/hostkit"}
	user := Layout{Run: "/run/user/1000/hostkit", Public: "/run/user/1000/hostkit/public", State: "/home/u/.local/state/hostkit", Log: "/home/u/.local/state/hostkit/log"}
	rootUser := Layout{Run: "/run/user/0/hostkit", Public: "/run/user/0/hostkit/public", State: "/root/.local/state/hostkit", Log: "/root/.local/state/hostkit/log"}
	under, err := RootLayout("/srv/hk")
	if err != nil {
		t.Fatal(err)
	}
	userEnv := map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000", "HOME": "/home/u"}
	rootEnv := map[string]string{"XDG_RUNTIME_DIR": "/run/user/0", "HOME": "/root"}
	tests := []struct {
		name    string
		root    string
		mode    string
		goos    string
		euid    int
		env     map[string]string
		want    Layout
		wantErr string
	}{
		{name: "auto as root", mode: LayoutAuto, goos: "linux", euid: 0, env: rootEnv, want: system},
		{name: "empty mode is auto", mode: "", goos: "linux", euid: 1000, env: userEnv, want: user},
		{name: "system as a service user", mode: LayoutSystem, goos: "linux", euid: 990, want: system},
		{name: "system as root", mode: LayoutSystem, goos: "linux", euid: 0, want: system},
		{name: "user as root", mode: LayoutUser, goos: "linux", euid: 0, env: rootEnv, want: rootUser},
		{name: "user as a user", mode: LayoutUser, goos: "linux", euid: 1000, env: userEnv, want: user},
		{name: "root with auto", root: "/srv/hk", mode: LayoutAuto, goos: "linux", euid: 990, want: under},
		{name: "root with system", root: "/srv/hk", mode: LayoutSystem, goos: "linux", wantErr: "exclusive"},
		{name: "root with user", root: "/srv/hk", mode: LayoutUser, goos: "linux", wantErr: "exclusive"},
		{name: "unknown mode", mode: "global", goos: "linux", wantErr: `got "global"`},
		{name: "system on macOS", mode: LayoutSystem, goos: "darwin", euid: 501, wantErr: "macOS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			if tt.goos != runtime.GOOS && tt.wantErr == "" {
				t.Skip("DefaultLayout's paths depend on the real GOOS")
			}
			got, err := layoutFor(tt.root, tt.mode, tt.goos, func(k string) string { return tt.env[k] }, tt.euid)
			if tt.wantErr != "" {
				is.True(err != nil)
				is.True(strings.Contains(err.Error(), tt.wantErr)) // error names the problem
				return
			}
			is.NoErr(err)
			is.Equal(got, tt.want)
		})
	}
}

// TestEnsurePublicNoChmodWhenRight: directories that are already 0755 are
// not chmod-ed (their ctime stays), so a daemon that does not own them
// (egressd under its unit's user; /run/hostkit is root's, from tmpfiles.d)
// does not fail with EPERM.
func TestEnsurePublicNoChmodWhenRight(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	l, err := RootLayout(filepath.Join(tmpRoot(t), "r"))
	is.NoErr(err)
	is.NoErr(l.EnsurePublic())
	ctime := func(p string) unix.Timespec {
		var st unix.Stat_t
		is.NoErr(unix.Stat(p, &st))
		return st.Ctim
	}
	before := map[string]unix.Timespec{l.Run: ctime(l.Run), l.Public: ctime(l.Public)}
	time.Sleep(20 * time.Millisecond)
	is.NoErr(l.EnsurePublic())
	for d, c := range before {
		is.Equal(ctime(d), c) // no chmod of a directory that is already 0755
	}
	is.NoErr(os.Chmod(l.Public, 0o750))
	is.NoErr(l.EnsurePublic())
	fi, err := os.Stat(l.Public)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o755)) // a wrong mode is still fixed
}
