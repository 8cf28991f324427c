package provider

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// readStat reads /proc/<pid>/stat (Linux; elsewhere it fails).
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// procStat is the part of /proc/<pid>/stat the provider uses (proc(5)).
type procStat struct {
	state   byte
	ppid    int
	session int
	start   uint64 // starttime, clock ticks since boot: with the pid, a process identity
}

// parseProcStat parses /proc/<pid>/stat text; the command name may contain
// spaces and parentheses, so fields are read after the last ')'.
func parseProcStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed stat")
	}
	ppid, err1 := strconv.Atoi(f[1])
	session, err2 := strconv.Atoi(f[3])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, fmt.Errorf("malformed stat")
	}
	return procStat{state: f[0][0], ppid: ppid, session: session, start: start}, nil
}
