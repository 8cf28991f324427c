package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// Layout is where a hostkit installation keeps its files (docs/design.md,
// "Paths"). All paths are absolute.
type Layout struct {
	Run    string // sockets: Run/<name>/api.sock
	Public string // files agents may read (the CA bundle): 0755, files 0644
	State  string // State/<name>/
	Log    string // Log/<name>/ holds audit.jsonl and daemon logs
	Config string // config files: Config/<binary>.conf; "" = none by default
}

// Daemon names, used for socket, state and log directories.
const (
	NameSecretd     = "secretd"
	NameEgressd     = "egressd"
	NameSupervisord = "supervisord"
	NameHelper      = "helper"
)

// Names lists every daemon in start order.
var Names = []string{NameSecretd, NameEgressd, NameSupervisord, NameHelper}

// RootLayout is the layout under `-root R`: R/run, R/run/public, R/state,
// R/log, R/etc.
func RootLayout(root string) (Layout, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return Layout{}, err
	}
	return Layout{
		Run:    filepath.Join(abs, "run"),
		Public: filepath.Join(abs, "run", "public"),
		State:  filepath.Join(abs, "state"),
		Log:    filepath.Join(abs, "log"),
		Config: filepath.Join(abs, "etc"),
	}, nil
}

// DefaultLayout is the layout without -root: the Linux system paths when
// running as root, the XDG user paths otherwise, and the macOS per-user
// paths on darwin. getenv is os.Getenv in production.
func DefaultLayout(getenv func(string) string, euid int) (Layout, error) {
	if runtime.GOOS == "darwin" {
		home := getenv("HOME")
		tmp := getenv("TMPDIR")
		if home == "" || tmp == "" {
			return Layout{}, errors.New("daemon.DefaultLayout: HOME and TMPDIR must be set on macOS")
		}
		run := filepath.Join(tmp, "io.hostkit")
		return Layout{
			Run:    run,
			Public: filepath.Join(run, "public"),
			State:  filepath.Join(home, "Library", "Application Support", "io.hostkit"),
			Log:    filepath.Join(home, "Library", "Logs", "io.hostkit"),
		}, nil
	}
	if euid == 0 {
		return Layout{
			Run:    "/run/hostkit",
			Public: "/run/hostkit/public",
			State:  "/var/lib/hostkit",
			Log:    "/var/log/hostkit",
			Config: "/etc/hostkit",
		}, nil
	}
	rt := getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return Layout{}, errors.New("daemon.DefaultLayout: XDG_RUNTIME_DIR is not set; pass -root")
	}
	st := getenv("XDG_STATE_HOME")
	if st == "" {
		home := getenv("HOME")
		if home == "" {
			return Layout{}, errors.New("daemon.DefaultLayout: neither XDG_STATE_HOME nor HOME is set; pass -root")
		}
		st = filepath.Join(home, ".local", "state")
	}
	run := filepath.Join(rt, "hostkit")
	return Layout{
		Run:    run,
		Public: filepath.Join(run, "public"),
		State:  filepath.Join(st, "hostkit"),
		Log:    filepath.Join(st, "hostkit", "log"),
	}, nil
}

// Layout modes for -layout: which default paths apply without -root.
const (
	LayoutAuto   = "auto"   // system paths as root, user paths otherwise (DefaultLayout)
	LayoutSystem = "system" // Linux system paths whatever the euid: a daemon run by systemd under its own user
	LayoutUser   = "user"   // XDG (or macOS per-user) paths, even as root
)

// ResolveLayout returns RootLayout(root) when root is set, else
// DefaultLayout for this process.
func ResolveLayout(root string) (Layout, error) {
	return ResolveLayoutMode(root, LayoutAuto)
}

// ResolveLayoutMode is ResolveLayout with a -layout mode: LayoutAuto (or
// "") picks by euid, LayoutSystem and LayoutUser force a column of
// the table of docs/design.md, "Paths".
func ResolveLayoutMode(root, mode string) (Layout, error) {
	return layoutFor(root, mode, runtime.GOOS, os.Getenv, os.Geteuid())
}

// layoutFor is ResolveLayoutMode with its inputs explicit. -root and a
// mode other than auto are exclusive; LayoutSystem does not exist on
// macOS, where hostkit runs as per-user launchd agents.
func layoutFor(root, mode, goos string, getenv func(string) string, euid int) (Layout, error) {
	switch mode {
	case "", LayoutAuto:
	case LayoutSystem, LayoutUser:
		if root != "" {
			return Layout{}, fmt.Errorf("daemon: -root and -layout %s are exclusive", mode)
		}
	default:
		return Layout{}, fmt.Errorf("daemon: -layout: want auto, system or user, got %q", mode)
	}
	if root != "" {
		return RootLayout(root)
	}
	switch mode {
	case LayoutSystem:
		if goos == "darwin" {
			return Layout{}, errors.New("daemon: -layout system: macOS has only the per-user layout")
		}
		euid = 0
	case LayoutUser:
		if euid == 0 {
			euid = -1 // any non-root euid selects the user paths
		}
	}
	return DefaultLayout(getenv, euid)
}

// Socket is the API socket path of daemon name: Run/<name>/api.sock.
func (l Layout) Socket(name string) string { return filepath.Join(l.Run, name, "api.sock") }

// StateDir is daemon name's private state directory.
func (l Layout) StateDir(name string) string { return filepath.Join(l.State, name) }

// LogDir is daemon name's audit and log directory.
func (l Layout) LogDir(name string) string { return filepath.Join(l.Log, name) }

// ConfigFile is binary's config file, or "" when the layout has none.
func (l Layout) ConfigFile(binary string) string {
	if l.Config == "" {
		return ""
	}
	return filepath.Join(l.Config, binary+".conf")
}

// EnsurePublic creates the run and public directories with mode 0755 (set
// explicitly, whatever the umask), so agents can read the CA bundle and reach
// the directory tree (docs/design.md, "Agents and isolation"). The run
// directory's parent (the -root directory) is made 0755 too when EnsurePublic
// creates it; an existing one (/run, $XDG_RUNTIME_DIR) keeps its mode.
// Directories that are already 0755 are not touched, so a daemon that does
// not own them (egressd under its unit's user) passes.
func (l Layout) EnsurePublic() error {
	parent := filepath.Dir(l.Run)
	chmod := []string{l.Run, l.Public}
	if _, err := os.Lstat(parent); errors.Is(err, os.ErrNotExist) {
		chmod = append([]string{parent}, chmod...)
	}
	for _, d := range []string{parent, l.Run, l.Public} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, d := range chmod {
		// A directory already 0755 is left alone: under systemd, egressd
		// runs as its own user and /run/hostkit is root's (tmpfiles.d), so a
		// chmod there would fail with EPERM.
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm() == 0o755 && fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) == 0 {
			continue
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
	}
	return nil
}
