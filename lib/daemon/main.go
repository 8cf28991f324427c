package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// RunFunc is a binary's run function: it parses args, builds the binary
// and runs until ctx ends (STYLE.md, "Thin main").
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Main is a daemon binary's whole main: a context cancelled by SIGINT or
// SIGTERM (DaemonSignalContext: SIGPIPE ignored, SIGHUP caught), run with the process's arguments and stdio,
// and the exit status ExitStatus gives, with "<binary>: <error>" on stderr
// when run fails.
func Main(binary string, run RunFunc) {
	ctx, stop := DaemonSignalContext(context.Background())
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	code := ExitStatus(err)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "%s: %v\n", binary, err)
	}
	os.Exit(code)
}

// ExitStatus maps run's error to the process's exit status, as Go's flag
// package does for flag.ExitOnError: 0 for nil and for -h/-help
// (flag.ErrHelp: the usage has been printed, nothing failed), 2 for any
// other command-line error (an unknown flag, a value that does not parse),
// 1 for everything else.
func ExitStatus(err error) int {
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		return 2
	}
	return 1
}
