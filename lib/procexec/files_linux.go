package procexec

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// markCloexec sets FD_CLOEXEC on every descriptor above 2, so the child
// inherits only 0, 1 and 2 (close_range(2) with CLOSE_RANGE_CLOEXEC, or
// each entry of /proc/self/fd on kernels before 5.11).
func markCloexec() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // closed meanwhile (the directory's own fd)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
			return err
		}
	}
	return nil
}

// procStat is the part of /proc/<pid>/stat the group cleanup needs.
type procStat struct {
	state      byte
	ppid, pgrp int
}

// readProcStat parses /proc/<pid>/stat (proc(5)); the command name may
// contain spaces and parentheses, so fields are read after the last ')'.
func readProcStat(pid string) (procStat, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed stat")
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("malformed stat")
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp}, nil
}
