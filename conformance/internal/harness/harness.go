// Package harness runs the OCI runtime conformance suite
// (github.com/opencontainers/runtime-tools v0.9.0 validation) against each
// available runtime provider the way hostkit's containerization-helper
// runs it, judges every test from its TAP output (a test that runs zero
// checks fails), compares the failures with a reviewed expected-failure
// list per provider codec and host kind, and checks (or rewrites) the
// capability snapshots derived from the run. conformance/README.md is the
// operator's guide.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Config is one harness run.
type Config struct {
	ModDir    string         // the conformance module (its go.mod pins the suite)
	Repo      string         // the repository root
	Providers []string       // runtimes to run, in order; runc is required
	Timeout   time.Duration  // per test
	Parallel  int            // tests of one provider run at once (fixed-cgroup tests never overlap)
	Run       *regexp.Regexp // when set, only matching tests (a partial run: no snapshot)
	Write     bool           // rewrite the snapshot files
	Out       string         // when set, a directory that keeps the results files
	Verbose   bool           // one line per test
}

// Required is the provider whose absence fails the run.
const Required = "runc"

// Run runs the suite and reports to out. It returns an error when runc is
// missing, a test failed that its list does not expect, a listed test
// passed, anything could not be cleaned up, or a snapshot differs.
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	ms, err := hostMounts()
	if err != nil {
		return err
	}
	kind, v2, err := HostKind(ms)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("/tmp", "hkc")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// Searchable (not listable) by others: see setup in run.go.
	if err := os.Chmod(tmp, 0o711); err != nil {
		return err
	}
	bin := filepath.Join(tmp, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return err
	}
	t0 := time.Now()
	suite, err := Build(ctx, cfg.ModDir, bin, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "conformance: built in %.1fs\n", time.Since(t0).Seconds())
	var runs []*Results
	var failures []string
	var skipped []string
	for _, name := range cfg.Providers {
		p, err := Detect(ctx, name, kind, v2)
		if err != nil {
			if name == Required {
				return fmt.Errorf("%s is required: %w", name, err)
			}
			skipped = append(skipped, fmt.Sprintf("%s: unavailable (%v)", name, err))
			fmt.Fprintf(out, "conformance: %s unavailable, skipped: %v\n", name, err)
			continue
		}
		r, err := runProvider(ctx, cfg, suite, p, filepath.Join(tmp, name), out)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	var reports []report
	for _, r := range runs {
		rep, err := judgeRun(cfg, suite, r)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
		failures = append(failures, rep.problems()...)
	}
	printSummary(out, reports, skipped)
	if err := saveResults(cfg, tmp, runs, out); err != nil {
		return err
	}
	if cfg.Run == nil {
		if err := snapshots(ctx, cfg, tmp, runs, out); err != nil {
			failures = append(failures, err.Error())
		}
	} else {
		fmt.Fprintln(out, "conformance: partial run (-run): snapshots not checked")
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d problem(s):\n  %s", len(failures), strings.Join(failures, "\n  "))
	}
	return nil
}

// runProvider runs every selected test against p, cfg.Parallel at a time.
// Tests that use the suite's fixed cgroup paths (/cgrouptest) also hold a
// lock, so two of them never overlap, and only they remove those cgroups
// afterwards (an rmdir could otherwise race another test's mkdir).
func runProvider(ctx context.Context, cfg Config, s *Suite, p *Provider, dir string, out io.Writer) (*Results, error) {
	if err := os.Mkdir(dir, 0o711); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	wrapped := ""
	if p.Wrapped {
		wrapped = ", private mount namespace without " + p.V2
	}
	fmt.Fprintf(out, "conformance: %s %s (%s) at %s on %s%s\n", p.Name, p.Version, p.Codec, p.Path, p.HostKind, wrapped)
	r := &Results{Schema: ResultsSchema, Suite: s.Name, Provider: p.Name, Version: p.Version, Codec: p.Codec,
		HostKind: p.HostKind, Wrapped: p.Wrapped, Partial: cfg.Run != nil}
	var idx []int
	for i, test := range s.Tests {
		if cfg.Run == nil || cfg.Run.MatchString(test) {
			idx = append(idx, i)
		}
	}
	results := make([]TestResult, len(s.Tests))
	// The list decides how many failed runs decide a test (attempt); a
	// missing or bad list is reported by judgeRun, and meanwhile every
	// test counts as expected to pass.
	exp, _ := readExpected(cfg, s, p.Codec, p.HostKind)
	var cgroupLock, outLock sync.Mutex
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range max(cfg.Parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				test := s.Tests[i]
				fixed := s.FixedCgroup[test]
				once := func(tdir string) TestResult {
					if fixed {
						cgroupLock.Lock()
						defer cgroupLock.Unlock()
					}
					res := runTest(ctx, s, p, test, tdir, cfg.Timeout, fixed)
					if err := os.RemoveAll(tdir); err != nil {
						res.Cleanup = append(res.Cleanup, err.Error())
					}
					return res
				}
				tdir := filepath.Join(dir, fmt.Sprintf("%02d", i))
				failRuns := failRunsPass
				if _, listed := exp[test]; listed {
					failRuns = failRunsListed
				}
				if exp.Race(test) {
					failRuns = 1 // either outcome is accepted
				}
				res := attempt(ctx, tdir, failRuns, once)
				res.Race = exp.Race(test)
				results[i] = res
				if cfg.Verbose && ctx.Err() == nil {
					status := "pass"
					if !res.Passed {
						status = "FAIL"
					}
					outLock.Lock()
					fmt.Fprintf(out, "  %-4s %-6s %-32s %4d checks %6.1fs  %s\n", p.Name, status, test, res.Checks, float64(res.DurationMS)/1000, res.Reason)
					outLock.Unlock()
				}
			}
		}()
	}
	for _, i := range idx {
		if ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, i := range idx {
		r.Tests = append(r.Tests, results[i])
	}
	r.DurationMS = time.Since(start).Milliseconds()
	return r, nil
}

func saveResults(cfg Config, tmp string, runs []*Results, out io.Writer) error {
	for _, r := range runs {
		name := "results-" + r.Codec + "-" + r.HostKind + ".json"
		if err := r.Write(filepath.Join(tmp, name)); err != nil {
			return err
		}
		if cfg.Out != "" {
			if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
				return err
			}
			if err := r.Write(filepath.Join(cfg.Out, name)); err != nil {
				return err
			}
			fmt.Fprintf(out, "conformance: wrote %s\n", filepath.Join(cfg.Out, name))
		}
	}
	return nil
}

// snapshots runs capsnap (in the containerization-helper module, which
// owns the capability map) over the results files.
func snapshots(ctx context.Context, cfg Config, tmp string, runs []*Results, out io.Writer) error {
	args := []string{"run", "./internal/capability/capsnap"}
	if cfg.Write {
		args = append(args, "-write")
	}
	for _, r := range runs {
		args = append(args, filepath.Join(tmp, "results-"+r.Codec+"-"+r.HostKind+".json"))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(cfg.Repo, "cmd", "containerization-helper")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return errors.New("capability snapshots differ from this run (see capsnap above)")
	}
	if err != nil {
		return fmt.Errorf("capsnap: %w", err)
	}
	return nil
}
