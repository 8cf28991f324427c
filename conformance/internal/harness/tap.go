package harness

import (
	"bufio"
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// Check is one TAP test line ("ok 3 - desc", "not ok 4 - desc # TODO x").
type Check struct {
	OK   bool
	Skip bool // "# SKIP": did not run
	Todo bool // "# TODO": counted as run; a TODO "not ok" still fails here
	Desc string
}

// Doc is one TAP document: what follows a "TAP version" header (or the
// start of the stream) up to the next header.
type Doc struct {
	HasPlan bool
	Plan    int // from "1..N"
	Checks  []Check
}

// Stream is a parsed TAP stream (TAP version 13, testanything.org). Only
// lines that start in column 0 are TAP; indented lines are YAML diagnostic
// blocks or nested output and are ignored, so the TAP that runtimetest
// prints inside a YAML block never counts as the outer test's checks.
type Stream struct {
	Docs    []Doc
	BailOut string // reason of "Bail out!", if any
	Bailed  bool
}

var (
	reCheck = regexp.MustCompile(`^(not )?ok\b(?:\s+([0-9]+))?(?:\s*-)?\s*(.*)$`)
	rePlan  = regexp.MustCompile(`^1\.\.([0-9]+)(?:\s*#.*)?$`)
)

// ParseTAP parses out. Lines it does not recognize are ignored (TAP
// allows them); a missing or second plan is judged by Judge, not here.
func ParseTAP(out []byte) Stream {
	var s Stream
	cur := -1
	newDoc := func() { s.Docs = append(s.Docs, Doc{}); cur = len(s.Docs) - 1 }
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case line == "" || line[0] == ' ' || line[0] == '\t' || line[0] == '#':
		case strings.HasPrefix(line, "TAP version "):
			newDoc()
		case strings.HasPrefix(line, "Bail out!"):
			s.BailOut, s.Bailed = strings.TrimSpace(strings.TrimPrefix(line, "Bail out!")), true
		case rePlan.MatchString(line):
			n, _ := strconv.Atoi(rePlan.FindStringSubmatch(line)[1])
			if cur < 0 || s.Docs[cur].HasPlan {
				newDoc() // a second plan without a header is a second document
			}
			s.Docs[cur].HasPlan, s.Docs[cur].Plan = true, n
		case reCheck.MatchString(line):
			if cur < 0 {
				newDoc()
			}
			m := reCheck.FindStringSubmatch(line)
			c := Check{OK: m[1] == "", Desc: m[3]}
			if desc, dir, ok := strings.Cut(c.Desc, "#"); ok {
				d := strings.ToUpper(strings.TrimSpace(dir))
				c.Skip, c.Todo = strings.HasPrefix(d, "SKIP"), strings.HasPrefix(d, "TODO")
				if c.Skip || c.Todo {
					c.Desc = strings.TrimSpace(desc)
				}
			}
			s.Docs[cur].Checks = append(s.Docs[cur].Checks, c)
		}
	}
	return s
}
