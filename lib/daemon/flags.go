package daemon

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/peterbourgon/ff/v3"
)

// Version is the version every binary reports (-version, health). Release
// builds set it with -ldflags "-X hostkit.dev/lib/daemon.Version=...".
var Version = "0.1.0"

// Common holds the flags every daemon takes.
type Common struct {
	Root        string // -root: the root layout of docs/design.md, "Paths"
	LayoutMode  string // -layout: LayoutAuto, LayoutSystem or LayoutUser; only without -root
	ConfigFile  string // -config: ff plain config file ("name value" lines)
	LogLevel    string // -log-level: debug, info, warn, error
	ShowVersion bool   // -version: print the version and exit
}

// Register adds the common flags to fs.
func (c *Common) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Root, "root", "", "root directory for sockets, state, logs and config (the layout of docs/design.md); default: system or user paths")
	fs.StringVar(&c.LayoutMode, "layout", LayoutAuto, "default paths without -root: auto (system as root, else user), system (/run/hostkit, /var/lib/hostkit, /var/log/hostkit, /etc/hostkit: for units running under their own user) or user")
	fs.StringVar(&c.ConfigFile, "config", "", "config file (one `flag value` per line); default <config dir>/<binary>.conf if it exists")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&c.ShowVersion, "version", false, "print the version and exit")
}

// ResolveLayout is the layout c's -root and -layout select
// (ResolveLayoutMode).
func (c *Common) ResolveLayout() (Layout, error) { return ResolveLayoutMode(c.Root, c.LayoutMode) }

// Level parses LogLevel; an unknown level is a usage error (exit status
// 2 through Main).
func (c *Common) Level() (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return 0, usageError{fmt.Errorf("-log-level: %w", err)}
	}
	return l, nil
}

// usageError is a command-line, environment or config-file error that
// Parse returns: Main exits with status 2 for it (ExitStatus).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// ErrVersionShown is returned by Parse after -version printed the version;
// callers return nil from run.
var ErrVersionShown = errors.New("version shown")

// Parse parses args into fs (which must have c registered) with ff/v3:
// command line first, then environment variables named envPrefix + "_" +
// the flag name upper-cased with '-' as '_', then the config file given by
// -config (or, when -config is not set, <layout config dir>/<binary>.conf
// if that file exists). It prints the version to stdout and returns
// ErrVersionShown for -version. Usage errors wrap the flag package's
// errors (flag.ErrHelp for -h) and make ExitStatus return 2 (0 for -h).
func Parse(fs *flag.FlagSet, c *Common, args []string, binary, envPrefix string, stdout io.Writer) error {
	opts := []ff.Option{
		ff.WithEnvVarPrefix(envPrefix),
		ff.WithConfigFileFlag("config"),
		ff.WithConfigFileParser(ff.PlainParser),
	}
	if err := ff.Parse(fs, args, opts...); err != nil {
		return usageError{err}
	}
	if c.ConfigFile == "" {
		// A default config file applies only when present; flags and env
		// already set win over it.
		if l, err := c.ResolveLayout(); err == nil {
			if p := l.ConfigFile(binary); p != "" {
				if _, err := os.Stat(p); err == nil {
					set := map[string]bool{}
					fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
					if err := applyConfigFile(fs, p, set); err != nil {
						return usageError{err}
					}
				}
			}
		}
	}
	if c.ShowVersion {
		fmt.Fprintf(stdout, "%s %s\n", binary, Version)
		return ErrVersionShown
	}
	return nil
}

func applyConfigFile(fs *flag.FlagSet, path string, set map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return ff.PlainParser(f, func(name, value string) error {
		name = strings.TrimPrefix(name, "-")
		if set[name] {
			return nil
		}
		if fs.Lookup(name) == nil {
			return fmt.Errorf("config file %s: unknown flag %q", path, name)
		}
		return fs.Set(name, value)
	})
}

// StringList is a flag.Value that collects repeated flags or a
// comma-separated list (e.g. -admin-users alice,bob).
type StringList []string

// String joins the list with commas.
func (s *StringList) String() string { return strings.Join(*s, ",") }

// Set appends each comma-separated item.
func (s *StringList) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*s = append(*s, item)
		}
	}
	return nil
}
