package cli

import (
	"context"
	"errors"
	"os"

	"github.com/peterbourgon/ff/v3/ffcli"
	"hostkit.dev/cmd/hostctl/internal/demo"
)

// demoCmd is `hostctl demo`: the main flow end to end on real programs
// under a temporary root (see package demo).
func demoCmd(g *globals) *ffcli.Command {
	fs := g.newFlagSet("demo")
	binDir := fs.String("bin-dir", "", "directory holding secretd, egressd and supervisord (default: hostctl's own directory)")
	keep := fs.Bool("keep", false, "leave the daemons running under the temporary root and print hostctl commands to explore them")
	return &ffcli.Command{
		Name:       "demo",
		ShortUsage: "hostctl demo [--keep] [--bin-dir DIR]",
		ShortHelp:  "run an agent that uses a credential it never sees, end to end, and check every step",
		LongHelp: "Starts secretd, egressd and supervisord under a fresh temporary root (never -root), two local HTTPS " +
			"servers, stores a credential and runs an agent (curl, and Python's requests when present) that holds only " +
			"a placeholder; isolated, the agent also runs Node's built-in fetch (/usr/bin/node) with no proxy variable, " +
			"which reaches egressd through the namespace's transparent path. Prints a transcript in which every line is an assertion; exits 0 only if every one held, " +
			"and removes everything it started, also on failure or Ctrl-C. Needs Linux; as a normal user the agent is " +
			"not isolated (it runs as you), as root it runs under its own uid.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{"demo takes no arguments"}
			}
			if g.json {
				return usageError{"demo prints a transcript; --json is not supported"}
			}
			exe, _ := os.Executable()
			_, err := demo.Run(ctx, demo.Config{BinDir: *binDir, Keep: *keep, Hostctl: exe, Out: g.stdout, CallTimeout: g.timeout})
			if errors.Is(err, demo.ErrFailed) {
				return exitError{code: ExitFailure, msg: "demo: failed (see the FAIL lines above)"}
			}
			return err
		},
	}
}
