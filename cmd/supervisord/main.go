// Command supervisord is hostkit's supervisord daemon (DESIGN.md, "The
// binaries"). `supervisord holder ...` is the hidden per-instance holder.
package main

import (
	"context"
	"fmt"
	"os"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/lib/daemon"
)

func main() {
	ctx, stop := daemon.SignalContext(context.Background())
	var err error
	if len(os.Args) > 1 && os.Args[1] == "holder" {
		err = holder.Main(ctx, os.Args[2:], os.Stderr)
	} else {
		err = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "supervisord: %v\n", err)
		os.Exit(1)
	}
}
