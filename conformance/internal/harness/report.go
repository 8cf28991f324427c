package harness

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// report is one provider's run judged against its list.
type report struct {
	r        *Results
	list     string // expected-failure list path, relative to the module
	missing  bool   // the list does not exist
	exp      Expected
	cmp      Comparison
	zero     int
	cleanups []string
}

// judgeRun loads the provider's expected-failure list and compares.
// expectedPath is the expected-failure list of a codec and host kind,
// relative to the module.
func expectedPath(codec, hostKind string) string {
	return filepath.Join("expected", codec+"-"+hostKind+".txt")
}

// readExpected reads and parses the expected-failure list of a codec and
// host kind (fs.ErrNotExist when there is none).
func readExpected(cfg Config, s *Suite, codec, hostKind string) (Expected, error) {
	path := expectedPath(codec, hostKind)
	b, err := os.ReadFile(filepath.Join(cfg.ModDir, path))
	if err != nil {
		return nil, err
	}
	exp, err := ParseExpected(b, s.Tests)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return exp, nil
}

func judgeRun(cfg Config, s *Suite, r *Results) (report, error) {
	rep := report{r: r, list: expectedPath(r.Codec, r.HostKind)}
	var err error
	rep.exp, err = readExpected(cfg, s, r.Codec, r.HostKind)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		rep.missing = true
	case err != nil:
		return rep, err
	}
	rep.cmp = Compare(r.Tests, rep.exp)
	for _, t := range r.Tests {
		if t.ZeroCheck {
			rep.zero++
		}
		for _, c := range t.Cleanup {
			rep.cleanups = append(rep.cleanups, t.Name+": "+c)
		}
	}
	return rep, nil
}

// problems lists what fails the run.
func (rep report) problems() []string {
	var out []string
	who := rep.r.Provider + " (" + rep.r.Codec + ", " + rep.r.HostKind + ")"
	if rep.missing {
		out = append(out, fmt.Sprintf("%s: no expected-failure list %s: review the failures above and write one", who, rep.list))
	}
	for _, n := range rep.cmp.Unexpected {
		out = append(out, fmt.Sprintf("%s: %s failed unexpectedly", who, n))
	}
	for _, n := range rep.cmp.Stale {
		out = append(out, fmt.Sprintf("%s: %s passed but %s expects it to fail: remove the line", who, n, rep.list))
	}
	for _, c := range rep.cleanups {
		out = append(out, fmt.Sprintf("%s: cleanup: %s", who, c))
	}
	return out
}

// printSummary prints the table, then the detail of every unexpected
// failure and the reason of every expected one.
func printSummary(out io.Writer, reps []report, skipped []string) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "provider\tcodec\thost kind\ttests\tpassed\tfailed\texpected-failed\tzero-check\tstale\ttime")
	for _, rep := range reps {
		r := rep.r
		passed := 0
		for _, t := range r.Tests {
			if t.Passed {
				passed++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1fs\n", r.Provider, r.Codec, r.HostKind, len(r.Tests),
			passed, len(rep.cmp.Unexpected), len(rep.cmp.Expected), rep.zero, len(rep.cmp.Stale), float64(r.DurationMS)/1000)
	}
	for _, s := range skipped {
		fmt.Fprintf(tw, "%s\n", s)
	}
	tw.Flush()
	fmt.Fprintln(out, "(failed: not on the expected-failure list; zero-check: failures that ran no check; stale: listed but passed; a race is neither)")
	for _, rep := range reps {
		for _, t := range rep.r.Tests {
			if t.RetriedAfter != "" && t.Passed { // a flake: a later run decided it
				fmt.Fprintf(out, "  retried   %s %-32s passed after: %s\n", rep.r.Provider, t.Name,
					strings.ReplaceAll(t.RetriedAfter, "\n", " | "))
			}
		}
	}
	for _, rep := range reps {
		for _, t := range rep.r.Tests {
			if t.Race {
				outcome := "failed"
				if t.Passed {
					outcome = "passed"
				}
				fmt.Fprintf(out, "  race      %s %-32s %s (not judged) %s\n", rep.r.Provider, t.Name, outcome, rep.exp[t.Name])
				continue
			}
			if t.Passed {
				continue
			}
			if reason, ok := rep.exp[t.Name]; ok {
				fmt.Fprintf(out, "  expected  %s %-32s %s\n", rep.r.Provider, t.Name, reason)
				continue
			}
			fmt.Fprintf(out, "  FAILED    %s %-32s %s\n", rep.r.Provider, t.Name, t.Reason)
			for i, c := range t.FailedChecks {
				if i == 5 {
					fmt.Fprintf(out, "            ... %d more failed checks\n", len(t.FailedChecks)-5)
					break
				}
				fmt.Fprintf(out, "            not ok: %s\n", c)
			}
			if t.StderrTail != "" {
				fmt.Fprintf(out, "            stderr: %s\n", strings.ReplaceAll(t.StderrTail, "\n", "\n                    "))
			}
		}
	}
}
