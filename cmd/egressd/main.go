// Command egressd is hostkit's egressd daemon (DESIGN.md, "The binaries").
package main

import (
	"context"
	"fmt"
	"os"

	"hostkit.dev/lib/daemon"
)

func main() {
	ctx, stop := daemon.SignalContext(context.Background())
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "egressd: %v\n", err)
		os.Exit(1)
	}
}
