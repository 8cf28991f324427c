// Command conformance runs the OCI runtime conformance suite
// (runtime-tools v0.9.0) against every available provider and checks the
// result against the reviewed expected-failure lists and the capability
// snapshots. Run it through scripts/conformance; conformance/README.md
// explains the flags, the lists and the host kinds.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"hostkit.dev/conformance/internal/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "conformance: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("conformance: ok")
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	providers := fs.String("providers", "runc,crun", "runtimes to run, comma-separated (runc is required)")
	timeout := fs.Duration("timeout", 90*time.Second, "per-test timeout (1s-10m)")
	parallel := fs.Int("parallel", 2, "tests of one provider run at once (1-8)")
	runRe := fs.String("run", "", "only tests matching this regexp (a partial run: snapshots are not checked)")
	write := fs.Bool("write", false, "rewrite the capability snapshot files from this run")
	outDir := fs.String("out", "", "directory that keeps the per-provider results files")
	repo := fs.String("repo", "..", "repository root (holds cmd/containerization-helper)")
	quiet := fs.Bool("q", false, "no line per test")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *timeout < time.Second || *timeout > 10*time.Minute {
		return fmt.Errorf("-timeout %s outside 1s-10m", *timeout)
	}
	if *parallel < 1 || *parallel > 8 {
		return fmt.Errorf("-parallel %d outside 1-8", *parallel)
	}
	mod, err := os.Getwd()
	if err != nil {
		return err
	}
	cfg := harness.Config{ModDir: mod, Providers: strings.Split(*providers, ","), Timeout: *timeout, Parallel: *parallel,
		Write: *write, Out: *outDir, Verbose: !*quiet}
	if cfg.Repo, err = filepath.Abs(*repo); err != nil {
		return err
	}
	if *runRe != "" {
		if cfg.Run, err = regexp.Compile(*runRe); err != nil {
			return err
		}
	}
	return harness.Run(ctx, cfg, out)
}
