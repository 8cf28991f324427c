// Package procstat reads /proc/<pid>/stat (proc(5)), the one reader of
// that file in hostkit: process identity (start time), parentage, process
// group, session, state and a zombie's exit status.
//
// It is a small parser of its own rather than github.com/prometheus/procfs
// because procfs's ProcStat has no exit_code (field 52), which the
// supervisor reads from a zombie it cannot reap; because procfs scans 42
// fields with fmt.Fscan, which costs allocations and microseconds on every
// read, while the supervisor's tree walk reads the stat of every process
// on the host each round; and because it would add modules for six
// numbers.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

// Stat is the part of /proc/<pid>/stat hostkit reads. Field numbers are
// proc(5)'s, counted from 1 for the pid.
type Stat struct {
	// State is field 3, one byte: 'R' running, 'S' sleeping, 'D' disk
	// sleep, 'Z' zombie (exited, not yet reaped), 'X' dead, 'T' stopped,
	// 't' tracing stop, 'I' idle kernel thread, ...
	State byte
	// PPID is field 4, the parent's pid; 0 when the parent is outside the
	// reader's pid namespace.
	PPID int
	// PGRP is field 5, the process group id.
	PGRP int
	// Session is field 6, the session id (equal to the pid for a session
	// leader).
	Session int
	// StartTime is field 22, when the process started, in clock ticks
	// after boot (sysconf(_SC_CLK_TCK), 100 per second on Linux). With the
	// pid and the boot id it names one process across pid reuse.
	StartTime uint64
	// ExitCode is field 52, the exit status in waitpid(2) form once the
	// process is a zombie (0 while it runs, or when the reader may not see
	// it); -1 when the line has no field 52 (Linux before 3.5).
	ExitCode int
}

// Exited reports whether the process has exited: a zombie ('Z') or dead
// ('X').
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// ErrMalformed is wrapped by the errors of Parse and Read for a line that
// is not a stat line: no ')' closing the command name, fewer than 22
// fields, a state that is not one byte, or a number that does not parse.
var ErrMalformed = errors.New("procstat: malformed stat")

// minFields is the number of fields a line must have: through StartTime.
const minFields = 22

// Parse parses the text of /proc/<pid>/stat. The command name (field 2)
// may hold spaces and parentheses, so fields are counted after its last
// ')'. It does not allocate unless it fails. Errors: ErrMalformed.
func Parse(b []byte) (Stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("%w: no ')' after the command name", ErrMalformed)
	}
	s := Stat{ExitCode: -1}
	n := 2 // fields seen: the pid and the command name
	for rest := b[i+1:]; ; {
		var f []byte
		if f, rest = nextField(rest); f == nil {
			break
		}
		n++
		var err error
		switch n {
		case 3:
			if len(f) != 1 {
				return Stat{}, fmt.Errorf("%w: state %q", ErrMalformed, string(f)) // a copy, so b can stay on the caller's stack
			}
			s.State = f[0]
		case 4:
			s.PPID, err = parseInt(f)
		case 5:
			s.PGRP, err = parseInt(f)
		case 6:
			s.Session, err = parseInt(f)
		case 22:
			s.StartTime, err = parseUint(f)
		case 52:
			s.ExitCode, err = parseInt(f)
		}
		if err != nil {
			return Stat{}, fmt.Errorf("%w: field %d: %v", ErrMalformed, n, err)
		}
	}
	if n < minFields {
		return Stat{}, fmt.Errorf("%w: %d fields, want at least %d", ErrMalformed, n, minFields)
	}
	return s, nil
}

// nextField returns the first run of non-space bytes of b (nil when only
// space is left) and what follows it. Space is ASCII white space: the
// kernel writes one ' ' between fields and '\n' at the end.
func nextField(b []byte) (field, rest []byte) {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	j := i
	for j < len(b) && !isSpace(b[j]) {
		j++
	}
	if i == j {
		return nil, nil
	}
	return b[i:j], b[j:]
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

var (
	errSyntax = errors.New("not a decimal number")
	errRange  = errors.New("out of range")
)

// parseUint parses a non-empty run of decimal digits (no sign) into a
// uint64.
func parseUint(f []byte) (uint64, error) {
	if len(f) == 0 {
		return 0, errSyntax
	}
	var v uint64
	for _, c := range f {
		if c < '0' || c > '9' {
			return 0, errSyntax
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, errRange
		}
		v = v*10 + d
	}
	return v, nil
}

// parseInt is parseUint for a value that must fit an int: the pids and
// the exit status, which the kernel never writes negative.
func parseInt(f []byte) (int, error) {
	v, err := parseUint(f)
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt {
		return 0, errRange
	}
	return int(v), nil
}
