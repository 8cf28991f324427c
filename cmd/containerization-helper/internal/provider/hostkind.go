package provider

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
)

// cgroupRoot is where the runtimes look for cgroup hierarchies; mounts
// elsewhere (inside containers, bind mounts) do not decide the host kind.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupMount is one cgroup or cgroup2 mount from mountinfo.
type cgroupMount struct {
	Point string   // mount point, unescaped
	V2    bool     // cgroup2
	Opts  []string // super options (v1: include the controllers, e.g. "cpu", "cpuacct")
}

// parseMountinfo returns the cgroup mounts at or under /sys/fs/cgroup from
// /proc/<pid>/mountinfo text (proc(5): "36 35 98:0 /mnt1 /mnt2 rw,noatime
// master:1 - ext3 /dev/root rw,errors=continue"). A malformed line is an
// error: the host kind must not be guessed from a partial table.
func parseMountinfo(b []byte) ([]cgroupMount, error) {
	if len(b) > 4<<20 {
		return nil, fmt.Errorf("mountinfo over 4 MiB")
	}
	var out []cgroupMount
	for n, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		pre, post, ok := strings.Cut(string(line), " - ")
		if !ok {
			return nil, fmt.Errorf("mountinfo line %d: no separator", n+1)
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 6 || len(g) < 3 {
			return nil, fmt.Errorf("mountinfo line %d: too few fields", n+1)
		}
		if g[0] != "cgroup" && g[0] != "cgroup2" {
			continue
		}
		point, err := unescapeMount(f[4])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", n+1, err)
		}
		if point != cgroupRoot && !strings.HasPrefix(point, cgroupRoot+"/") {
			continue
		}
		out = append(out, cgroupMount{Point: filepath.Clean(point), V2: g[0] == "cgroup2", Opts: strings.Split(g[2], ",")})
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for space, \011,
// \012, \134).
func unescapeMount(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 >= len(s) {
			return "", fmt.Errorf("truncated escape")
		}
		v := 0
		for _, c := range []byte(s[i+1 : i+4]) {
			if c < '0' || c > '7' {
				return "", fmt.Errorf("bad escape")
			}
			v = v*8 + int(c-'0')
		}
		if v > 0xff {
			return "", fmt.Errorf("bad escape")
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// hostKind classifies the cgroup mounts; for a hybrid host it also returns
// the one cgroup2 mount point the crun wrapper must unmount.
func hostKind(ms []cgroupMount) (kind, v2 string, err error) {
	var v1s, v2s []string
	for _, m := range ms {
		if m.V2 {
			v2s = append(v2s, m.Point)
		} else {
			v1s = append(v1s, m.Point)
		}
	}
	switch {
	case len(v1s) == 0 && len(v2s) == 1 && v2s[0] == cgroupRoot:
		return HostCgroupV2, "", nil
	case len(v1s) > 0 && len(v2s) == 0:
		return HostCgroupV1, "", nil
	case len(v1s) > 0 && len(v2s) == 1 && v2s[0] != cgroupRoot:
		return HostCgroupHybrid, v2s[0], nil
	}
	return "", "", fmt.Errorf("unrecognised cgroup layout under %s (%d v1 and %d v2 mounts)", cgroupRoot, len(v1s), len(v2s))
}
