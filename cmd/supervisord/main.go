// Command supervisord is hostkit's supervisord daemon (DESIGN.md, "The
// binaries"). `supervisord holder ...` is the hidden per-instance holder;
// `supervisord agent-exec ...` the hidden process of a tmux pane, which
// execs the agent.
package main

import (
	"context"
	"fmt"
	"os"

	"hostkit.dev/cmd/supervisord/internal/holder"
	"hostkit.dev/lib/daemon"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "agent-exec" {
		// A tmux pane's process: no signal set-up, so that the agent it
		// execs does not inherit an ignored SIGPIPE.
		err := holder.AgentExec(os.Args[2:], os.Stderr)
		fmt.Fprintf(os.Stderr, "supervisord: %v\n", err)
		os.Exit(127)
	}
	ctx, stop := daemon.SignalContext(context.Background())
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "holder":
		err = holder.Main(ctx, os.Args[2:], os.Stderr)
	default:
		err = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "supervisord: %v\n", err)
		os.Exit(1)
	}
}
