package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
)

func TestJudge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		out       string
		exit      int
		timedOut  bool
		pass      bool
		zero      bool
		checks    int
		reason    string // substring of the reason
		passedChk []string
	}{
		{name: "pass", out: "TAP version 13\nok 1 - a\nok 2 - b\n1..2\n", pass: true, checks: 2, passedChk: []string{"a", "b"}},
		{name: "plan first", out: "1..1\nok 1 - a\n", pass: true, checks: 1, passedChk: []string{"a"}},
		{name: "not ok", out: "TAP version 13\nok 1 - a\nnot ok 2 - b\n1..2\n", checks: 2, reason: "1 of 2 checks not ok", passedChk: []string{"a"}},
		{name: "zero checks, plan 1..0", out: "TAP version 13\n  ---\n  {\"error\": \"x\"}\n  ...\n1..0\n", zero: true, reason: "zero checks ran"},
		{name: "no output at all", out: "", zero: true, reason: "no TAP output"},
		{name: "only skips", out: "TAP version 13\nok 1 # SKIP not set\n1..1\n", zero: true, reason: "zero checks ran"},
		{name: "second document empty", out: "TAP version 13\nok 1 - a\n1..1\nTAP version 13\n1..0\n", zero: true, checks: 1,
			reason: "TAP document 2 of 2: zero checks ran", passedChk: []string{"a"}},
		{name: "second plan without header", out: "ok 1 - a\n1..1\n1..0\n", zero: true, checks: 1, reason: "document 2 of 2", passedChk: []string{"a"}},
		{name: "no plan", out: "TAP version 13\nok 1 - a\n", checks: 1, reason: "no plan", passedChk: []string{"a"}},
		{name: "plan mismatch", out: "TAP version 13\nok 1 - a\n1..3\n", checks: 1, reason: "plan 1..3 but 1 checks", passedChk: []string{"a"}},
		{name: "nested TAP in YAML ignored", out: "TAP version 13\nok 1 - outer\n  ---\n  stdout: |\n    not ok 1 - inner\n    ok 2 - inner\n  ...\n1..1\n",
			pass: true, checks: 1, passedChk: []string{"outer"}},
		{name: "exit status", out: "TAP version 13\nok 1 - a\n1..1\n", exit: 1, checks: 1, reason: "exit status 1", passedChk: []string{"a"}},
		{name: "timeout", out: "TAP version 13\nok 1 - a\n", exit: -1, timedOut: true, checks: 1, reason: "timed out after 1m0s", passedChk: []string{"a"}},
		{name: "bail out", out: "TAP version 13\nok 1 - a\nBail out! broken\n1..1\n", checks: 1, reason: "bailed out: broken", passedChk: []string{"a"}},
		{name: "todo not ok fails", out: "ok 1 - a\nnot ok 2 - b # TODO later\n1..2\n", checks: 2, reason: "1 of 2 checks not ok", passedChk: []string{"a"}},
		{name: "same description fails once", out: "ok 1 - a\nnot ok 2 - a\nok 3 - b\n1..3\n", checks: 3, reason: "not ok", passedChk: []string{"b"}},
		{name: "skip with description", out: "ok 1 - a\nok 2 - b # skip nope\n1..2\n", pass: true, checks: 1, passedChk: []string{"a"}},
		{name: "description with hash", out: "ok 1 - a # b\n1..1\n", pass: true, checks: 1, passedChk: []string{"a # b"}},
		{name: "okay is not ok", out: "okay 1\n1..0\n", zero: true, reason: "zero checks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			v := Judge(ParseTAP([]byte(tt.out)), tt.exit, tt.timedOut, time.Minute)
			is.Equal(v.Passed, tt.pass)
			is.Equal(v.ZeroCheck, tt.zero)
			is.Equal(v.Checks, tt.checks)
			is.True(strings.Contains(v.Reason(), tt.reason))
			if tt.pass {
				is.Equal(v.Reason(), "")
			}
			is.Equal(v.PassedChecks, tt.passedChk)
		})
	}
}

func TestParseTAPSkipAndDescriptions(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := ParseTAP([]byte("TAP version 13\nok 1 - has expected hostname\n# expect: x\nok 306 # SKIP linux.mountlabel not set\nnot ok 7 - exit status 1\n1..3\n"))
	is.Equal(len(s.Docs), 1)
	is.Equal(s.Docs[0].Checks, []Check{{OK: true, Desc: "has expected hostname"}, {OK: true, Skip: true}, {Desc: "exit status 1"}})
	is.Equal(s.Docs[0].Plan, 3)
}
