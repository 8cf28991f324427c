package provider

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"hostkit.dev/lib/procstat"
	"hostkit.dev/lib/wire"
)

// parseProcCgroup parses /proc/<pid>/cgroup (cgroups(7):
// "hierarchy-ID:controller-list:cgroup-path" per line) into a map from
// controller to path; the v2 entry ("0::/path") is under "". Paths must be
// absolute and clean.
func parseProcCgroup(b []byte) (map[string]string, error) {
	out := map[string]string{}
	for line := range bytes.SplitSeq(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		id, rest, ok1 := strings.Cut(string(line), ":")
		ctrls, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 || id == "" || !cleanAbs(path) {
			return nil, fmt.Errorf("malformed cgroup line")
		}
		if ctrls == "" {
			out[""] = path
			continue
		}
		for c := range strings.SplitSeq(ctrls, ",") {
			out[c] = path
		}
	}
	return out, nil
}

// cgroupStats reads one sample for the process pid from its cgroups (crun
// 1.8 has no `events`): on v1 and hybrid hosts cpuacct.usage (ns),
// memory.usage_in_bytes and pids.current of its v1 cgroups; on a v2 host
// cpu.stat usage_usec (µs, converted), memory.current and pids.current.
// The process must be a session leader (a container init), which also
// guards against a pid reused since `state` named it. Errors: CodeFailed.
func (p *cli) cgroupStats(pid int) (*Stats, error) {
	fail := func(err error) error {
		e := wire.Wrap(CodeFailed, p.name+" stats: cannot read the container's cgroup counters", err)
		e.Retry = wire.RetryAfterObserve
		return e
	}
	b, err := readSmall("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil, fail(err)
	}
	paths, err := parseProcCgroup(b)
	if err != nil {
		return nil, fail(err)
	}
	if ps, err := procstat.Read(pid); err != nil || ps.Session != pid {
		return nil, fail(fmt.Errorf("pid %d is no longer a container init", pid))
	}
	var s Stats
	file := func(ctrl, name string) (string, error) {
		path, ok := paths[ctrl]
		mount := ""
		for _, m := range p.mounts {
			if ctrl == "" && m.V2 || ctrl != "" && !m.V2 && slices.Contains(m.Opts, ctrl) {
				mount = m.Point
			}
		}
		if !ok || mount == "" {
			return "", fmt.Errorf("no %q hierarchy", ctrl)
		}
		f := filepath.Join(mount, path, name)
		if !within(f, mount) {
			return "", fmt.Errorf("cgroup path escapes its mount")
		}
		return f, nil
	}
	read := func(ctrl, name string, dst *uint64) error {
		f, err := file(ctrl, name)
		if err == nil {
			*dst, err = readUintFile(f)
		}
		return err
	}
	if p.kind == HostCgroupV2 {
		err = read("", "memory.current", &s.MemoryBytes)
		if err == nil {
			err = read("", "pids.current", &s.Pids)
		}
		if err == nil {
			var f string
			if f, err = file("", "cpu.stat"); err == nil {
				var usec uint64
				usec, err = readKeyed(f, "usage_usec")
				s.CPUTotalNS = usec * 1000
			}
		}
	} else {
		err = read("cpuacct", "cpuacct.usage", &s.CPUTotalNS)
		if err == nil {
			err = read("memory", "memory.usage_in_bytes", &s.MemoryBytes)
		}
		if err == nil {
			err = read("pids", "pids.current", &s.Pids)
		}
	}
	if err != nil {
		return nil, fail(err)
	}
	return &s, nil
}

// readSmall reads at most 64 KiB of a /proc or cgroup file.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10+1))
	if err == nil && len(b) > 64<<10 {
		err = fmt.Errorf("over 64 KiB")
	}
	return b, err
}

// readUintFile reads a cgroup file that holds one decimal number and a
// newline.
func readUintFile(path string) (uint64, error) {
	b, err := readSmall(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSuffix(string(b), "\n"), 10, 64)
}

// readKeyed returns the value of key in a flat-keyed cgroup file ("key
// value" lines, cgroup-v2.rst).
func readKeyed(path, key string) (uint64, error) {
	b, err := readSmall(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s", key)
}
