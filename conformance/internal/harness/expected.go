package harness

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Expected is a reviewed expected-failure list for one provider codec and
// host kind: expected/<codec>-<host kind>.txt, one test per line followed
// by "# " and a one-line reason; blank lines and lines that start with "#"
// are comments.
type Expected map[string]string // test -> reason

// RacePrefix starts the reason of a test whose outcome depends on timing
// inside the suite program, in either direction (a container's process
// that may or may not have ended before the program acts on it): such a
// test is run once, either outcome is accepted, and no capability rests
// on it (its result says Race, and capsnap counts it as failed).
const RacePrefix = "race:"

// Race reports whether exp lists test as a race (RacePrefix).
func (exp Expected) Race(test string) bool {
	return strings.HasPrefix(exp[test], RacePrefix)
}

var reTestName = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// ParseExpected parses a list. Every entry must name a test of suite,
// once, with a non-empty reason.
func ParseExpected(b []byte, suite []string) (Expected, error) {
	out := Expected{}
	var errs []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, reason, _ := strings.Cut(line, "#")
		name, reason = strings.TrimSpace(name), strings.TrimSpace(reason)
		switch {
		case !reTestName.MatchString(name):
			errs = append(errs, fmt.Sprintf("line %d: %q is not a test name", n, name))
		case !slices.Contains(suite, name):
			errs = append(errs, fmt.Sprintf("line %d: %s is not a test of the suite", n, name))
		case reason == "":
			errs = append(errs, fmt.Sprintf("line %d: %s has no reason (write `%s  # why it fails`)", n, name, name))
		case out[name] != "":
			errs = append(errs, fmt.Sprintf("line %d: %s is listed twice", n, name))
		default:
			out[name] = reason
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// Comparison is a run measured against its expected-failure list.
type Comparison struct {
	Unexpected []string // failed, not listed
	Stale      []string // listed, but passed: the list is out of date
	Expected   []string // failed and listed
	Race       []string // listed as a race: not judged
}

// OK reports whether the run matches the list exactly.
func (c Comparison) OK() bool { return len(c.Unexpected) == 0 && len(c.Stale) == 0 }

// Compare measures results against exp. Only tests that ran are compared,
// so a partial run (-run) judges its own tests only.
func Compare(tests []TestResult, exp Expected) Comparison {
	var c Comparison
	for _, t := range tests {
		_, listed := exp[t.Name]
		switch {
		case exp.Race(t.Name):
			c.Race = append(c.Race, t.Name)
		case !t.Passed && listed:
			c.Expected = append(c.Expected, t.Name)
		case !t.Passed:
			c.Unexpected = append(c.Unexpected, t.Name)
		case listed:
			c.Stale = append(c.Stale, t.Name)
		}
	}
	return c
}
