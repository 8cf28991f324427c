// Command hostctl is the admin's client for every hostkit daemon.
package main

import (
	"context"
	"os"

	"hostkit.dev/cmd/hostctl/internal/cli"
	"hostkit.dev/lib/daemon"
)

func main() {
	ctx, stop := daemon.SignalContext(context.Background())
	code := cli.Run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
