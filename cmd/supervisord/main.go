// Command supervisord is hostkit's supervisord daemon (docs/design.md, "The
// binaries"). `supervisord holder ...` is the hidden per-instance holder;
// `supervisord agent-exec ...` the hidden process of a tmux pane, which execs
// the agent.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

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
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "holder":
		// Not daemon.SignalContext: an ignored SIGPIPE would be inherited
		// by the agent. Go's own handling (EPIPE, except on fds 1 and 2,
		// which are /dev/null and holder.err) is what the holder needs.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = holder.Main(ctx, os.Args[2:], os.Stderr)
		stop()
	default:
		ctx, stop := daemon.DaemonSignalContext(context.Background())
		err = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
	}
	if code := daemon.ExitStatus(err); code != 0 {
		fmt.Fprintf(os.Stderr, "supervisord: %v\n", err)
		os.Exit(code)
	}
}
