package harness

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verdict is how one validation test went.
type Verdict struct {
	Passed    bool
	ZeroCheck bool // some TAP document (or the whole output) ran no check
	Checks    int  // checks that ran (not SKIP), over all documents
	NotOK     int
	Skipped   int
	Reasons   []string // why it failed, most telling first
	// PassedChecks are the descriptions of checks that ran and passed
	// every time they ran; FailedChecks those that failed at least once.
	// Both sorted and unique.
	PassedChecks, FailedChecks []string
}

// Judge decides a test from its TAP output and how it ended. A test passes
// only if it exited 0 in time, did not bail out, and every TAP document in
// its output has a plan, as many checks as planned, no "not ok" (TODO
// included), and at least one check that ran: a test that runs zero checks
// evidences nothing and counts as a failure.
func Judge(s Stream, exitCode int, timedOut bool, timeout time.Duration) Verdict {
	var v Verdict
	fail := func(format string, a ...any) { v.Reasons = append(v.Reasons, fmt.Sprintf(format, a...)) }
	if timedOut {
		fail("timed out after %s (process group killed)", timeout)
	}
	if len(s.Docs) == 0 {
		v.ZeroCheck = true
		fail("no TAP output: zero checks")
	}
	ok, bad := map[string]bool{}, map[string]bool{}
	for i, d := range s.Docs {
		ran := 0
		for _, c := range d.Checks {
			switch {
			case c.Skip:
				v.Skipped++
				continue
			case c.OK:
				ok[c.Desc] = true
			default:
				bad[c.Desc] = true
				v.NotOK++
			}
			ran++
		}
		v.Checks += ran
		where := ""
		if len(s.Docs) > 1 {
			where = fmt.Sprintf("TAP document %d of %d: ", i+1, len(s.Docs))
		}
		if ran == 0 {
			v.ZeroCheck = true
			fail("%szero checks ran", where)
		}
		switch {
		case !d.HasPlan:
			fail("%sno plan (the test stopped early)", where)
		case d.Plan != len(d.Checks):
			fail("%splan 1..%d but %d checks", where, d.Plan, len(d.Checks))
		}
	}
	if v.NotOK > 0 {
		fail("%d of %d checks not ok", v.NotOK, v.Checks)
	}
	if s.Bailed {
		fail("bailed out: %s", s.BailOut)
	}
	if exitCode != 0 && !timedOut {
		fail("exit status %d", exitCode)
	}
	for d := range ok {
		if !bad[d] {
			v.PassedChecks = append(v.PassedChecks, d)
		}
	}
	for d := range bad {
		v.FailedChecks = append(v.FailedChecks, d)
	}
	slices.Sort(v.PassedChecks)
	slices.Sort(v.FailedChecks)
	v.Passed = len(v.Reasons) == 0
	return v
}

// Reason is the verdict's reasons on one line.
func (v Verdict) Reason() string { return strings.Join(v.Reasons, "; ") }
