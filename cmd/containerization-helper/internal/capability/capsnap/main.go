// Command capsnap derives capability snapshots from conformance results
// (the files the harness in conformance/ writes) and checks them against
// the checked-in snapshot files, or rewrites those with -write. The
// harness runs it from the containerization-helper module:
//
//	go run ./internal/capability/capsnap [-write] [-dir D] results.json...
//
// It exits 1 when a checked-in snapshot differs from what a run produced
// (printing the difference), 2 on bad input.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "capsnap:", err)
	}
	os.Exit(code)
}

// run is main without the process: it returns the exit code.
func run(_ context.Context, args []string, stdout io.Writer) (int, error) {
	cfg, err := parseFlags(args)
	if err != nil {
		return 2, err
	}
	stale := 0
	for _, path := range cfg.results {
		s, err := fromResults(path)
		if err != nil {
			return 2, err
		}
		same, err := reconcile(cfg, s, stdout)
		if err != nil {
			return 2, err
		}
		if !same {
			stale++
		}
	}
	if stale > 0 {
		return 1, fmt.Errorf("%d checked-in snapshot(s) differ from this run: review the difference, then run scripts/conformance -write", stale)
	}
	return 0, nil
}
