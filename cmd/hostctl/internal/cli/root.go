// Package cli implements hostctl's commands (noun-verb, ffcli).
package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
	"hostkit.dev/lib/daemon"
	"hostkit.dev/lib/rpc"
)

// globals are the flags every command accepts (before or after its name).
type globals struct {
	root       string
	layoutMode string
	json       bool
	timeout    time.Duration
	sockets    map[string]*string // daemon name → socket override
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.root, "root", g.root, "hostkit root directory (as the daemons' -root); default: system or user paths")
	fs.StringVar(&g.layoutMode, "layout", g.layoutMode, "layout without -root: auto (system paths as root, user paths otherwise), system or user")
	fs.BoolVar(&g.json, "json", g.json, "print JSON instead of a table")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "timeout for each daemon call")
	for _, name := range daemon.Names {
		fs.StringVar(g.sockets[name], name+"-socket", *g.sockets[name], "socket path of "+name+" (default under the layout)")
	}
}

// layout resolves the layout from -root.
func (g *globals) layout() (daemon.Layout, error) {
	return daemon.ResolveLayoutMode(g.root, g.layoutMode)
}

// socket returns daemon name's socket path: its flag, else the layout's.
func (g *globals) socket(name string) (string, error) {
	if s := *g.sockets[name]; s != "" {
		return s, nil
	}
	l, err := g.layout()
	if err != nil {
		return "", err
	}
	return l.Socket(name), nil
}

// client returns a client for daemon name.
func (g *globals) client(name string) (*rpc.Client, error) {
	p, err := g.socket(name)
	if err != nil {
		return nil, err
	}
	return rpc.NewClient(p, g.timeout), nil
}

// newFlagSet returns a flag set for one command with the globals on it.
func (g *globals) newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("hostctl "+name, flag.ContinueOnError)
	fs.SetOutput(g.stderr)
	g.register(fs)
	return fs
}

// Run runs hostctl with args and returns the process exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{layoutMode: "auto", timeout: 10 * time.Second, sockets: map[string]*string{}, stdin: stdin, stdout: stdout, stderr: stderr}
	for _, name := range daemon.Names {
		g.sockets[name] = new(string)
	}
	rootFS := g.newFlagSet("")
	root := &ffcli.Command{
		Name:       "hostctl",
		ShortUsage: "hostctl [-root DIR] <noun> <verb> [flags]",
		ShortHelp:  "the admin's client for hostkit",
		FlagSet:    rootFS,
		UsageFunc:  overviewUsage,
		Options:    []ff.Option{ff.WithEnvVarPrefix("HOSTCTL")},
		Subcommands: []*ffcli.Command{
			doctorCmd(g),
			secretCmd(g),
			leaseCmd(g),
			egressCmd(g),
			instanceCmd(g),
			containerCmd(g),
			versionCmd(g),
			auditCmd(g),
			completionCmd(g),
			helpCmd(g),
			demoCmd(g),
		},
		Exec: groupExec(""),
	}
	// A parse error is a usage error (exit 2), whatever ffcli wraps it in.
	err := root.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		err = usageError{err.Error()}
	}
	if err == nil {
		err = root.Run(ctx)
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		printError(stderr, err)
	}
	return exitCode(err)
}

func versionCmd(g *globals) *ffcli.Command {
	return &ffcli.Command{
		Name:       "version",
		ShortUsage: "hostctl version",
		ShortHelp:  "print hostctl's version",
		FlagSet:    g.newFlagSet("version"),
		Exec: func(ctx context.Context, args []string) error {
			if g.json {
				return writeJSON(g.stdout, map[string]string{"version": daemon.Version})
			}
			_, err := io.WriteString(g.stdout, "hostctl "+daemon.Version+"\n")
			return err
		},
	}
}
