package provider

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
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

// cgroupMounts keeps the cgroup and cgroup2 mounts at or under
// /sys/fs/cgroup of a mount table. github.com/moby/sys/mountinfo reads the
// table (proc(5) mountinfo, octal escapes undone) and fails on a malformed
// line, so the host kind is never guessed from a partial table.
func cgroupMounts(ms []*mountinfo.Info) []cgroupMount {
	var out []cgroupMount
	for _, m := range ms {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		if m.Mountpoint != cgroupRoot && !strings.HasPrefix(m.Mountpoint, cgroupRoot+"/") {
			continue
		}
		out = append(out, cgroupMount{Point: filepath.Clean(m.Mountpoint), V2: m.FSType == "cgroup2", Opts: strings.Split(m.VFSOptions, ",")})
	}
	return out
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
