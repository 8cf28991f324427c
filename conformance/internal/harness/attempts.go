package harness

import (
	"context"
	"fmt"
	"strings"
)

// maxBlindRuns bounds the runs of one test that produce no evidence at all
// (no TAP output and a non-zero exit: the runtime failed before the program
// ran a check). runc 1.1's init process holds about 993 MiB of address
// space, so a test that sets a soft RLIMIT_AS of 1 GiB (process_rlimits)
// makes the runtime's own seccomp set-up fail with ENOMEM in about one
// create of fifteen, one of six under full CPU load, with no clustering
// seen (conformance/README.md, "Retries"). Six such runs in a row are a
// failure; at one in six, chance alone gives that about once in 50,000.
const maxBlindRuns = 6

// blind reports whether res evidences nothing either way: the program
// printed no TAP and failed, so the runtime or the program never got as far
// as a check. A program that exits 0 without a check (several suite
// programs do by nature) is not blind: it ran, and ran no check.
func blind(res TestResult) bool {
	return res.ZeroCheck && res.Checks == 0 && res.ExitCode != 0 && !res.TimedOut
}

// Failed runs with evidence that decide a test: a test the expected-failure
// list names fails on its second, one expected to pass on its third. A
// suite program can race the container it tests: killsig signals the
// container's shell as soon as the runtime reports it running, and a
// signal that arrives before the shell has installed its trap is ignored
// (the shell is the PID namespace's init), so the container runs on and
// the check fails. Under load that happened twice in a row for runc on a
// fresh clone (load average 12 on 2 cores), which dropped a capability
// the runtime has; a third run makes a chance failure far rarer, while a
// runtime that lacks the capability still fails every run.
const (
	failRunsListed = 2
	failRunsPass   = 3
)

// attempt runs one test until it is decided, each run in a fresh directory
// (dir, then dir+"r1", dir+"r2", ...): a run that passes decides at once;
// a failed run with evidence is run again until failRuns of them failed
// (failRunsListed or failRunsPass), so a capability leaves the snapshot
// only when every one of them lacks it; a blind run is repeated up to
// maxBlindRuns times in all. The deciding result is the last run's;
// RetriedAfter keeps the earlier runs' reasons.
func attempt(ctx context.Context, dir string, failRuns int, once func(dir string) TestResult) TestResult {
	var earlier, cleanup []string
	var evidence *TestResult // the last failed run that did evidence something
	blinds, failures := 0, 0
	for n := 0; ; n++ {
		d := dir
		if n > 0 {
			d = fmt.Sprintf("%sr%d", dir, n)
		}
		res := once(d)
		cleanup = append(cleanup, res.Cleanup...)
		decide := func(r TestResult) TestResult {
			r.Cleanup = cleanup
			if len(earlier) > 0 {
				r.RetriedAfter = strings.Join(earlier, "; then ")
			}
			return r
		}
		if res.Passed || ctx.Err() != nil {
			return decide(res)
		}
		if blind(res) {
			blinds++
		} else {
			failures++
			evidence = &res
		}
		switch {
		case failures >= failRuns:
			return decide(res)
		case blinds >= maxBlindRuns && evidence != nil:
			return decide(*evidence)
		case blinds >= maxBlindRuns:
			return decide(res)
		}
		why := fmt.Sprintf("run %d: %s", n+1, res.Reason)
		if res.StderrTail != "" {
			why += "; stderr: " + res.StderrTail
		}
		earlier = append(earlier, why)
	}
}
