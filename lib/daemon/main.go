package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
)

// RunFunc is a binary's run function: it parses args, builds the binary
// and runs until ctx ends (STYLE.md, "Thin main").
type RunFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// Main is a daemon binary's whole main: a context cancelled by SIGINT or
// SIGTERM (SIGPIPE ignored), run with the process's arguments and stdio,
// and exit status 1 with "<binary>: <error>" on stderr when run fails.
func Main(binary string, run RunFunc) {
	ctx, stop := SignalContext(context.Background())
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", binary, err)
		os.Exit(1)
	}
}
