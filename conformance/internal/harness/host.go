package harness

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// Host kinds, as internal/provider names them.
const (
	KindV1     = "cgroup-v1"
	KindHybrid = "cgroup-hybrid"
	KindV2     = "cgroup-v2"
)

const cgroupRoot = "/sys/fs/cgroup"

// Mount is one line of the mount table (proc(5) mountinfo).
type Mount struct {
	Point  string
	FSType string
	Super  []string // super options (v1 cgroups: the controllers)
}

// mountsOf converts a mount table, in its order. The table is read by
// github.com/moby/sys/mountinfo (proc(5) mountinfo, octal escapes undone),
// which fails on a malformed line, so the host kind is never guessed from
// a partial table.
func mountsOf(ms []*mountinfo.Info) []Mount {
	out := make([]Mount, 0, len(ms))
	for _, m := range ms {
		out = append(out, Mount{Point: m.Mountpoint, FSType: m.FSType, Super: strings.Split(m.VFSOptions, ",")})
	}
	return out
}

// CgroupMounts returns the cgroup and cgroup2 mounts at or under
// /sys/fs/cgroup.
func CgroupMounts(ms []Mount) []Mount {
	var out []Mount
	for _, m := range ms {
		if (m.FSType == "cgroup" || m.FSType == "cgroup2") &&
			(m.Point == cgroupRoot || strings.HasPrefix(m.Point, cgroupRoot+"/")) {
			m.Point = filepath.Clean(m.Point)
			out = append(out, m)
		}
	}
	return out
}

// HostKind classifies the cgroup layout: only cgroup2 (at /sys/fs/cgroup)
// is v2, cgroup v1 controllers beside a cgroup2 mount is hybrid, v1 alone
// is v1. It returns the cgroup2 mount point of a hybrid host.
func HostKind(ms []Mount) (kind, v2 string, err error) {
	var v1 bool
	for _, m := range CgroupMounts(ms) {
		switch m.FSType {
		case "cgroup2":
			v2 = m.Point
		case "cgroup":
			v1 = true
		}
	}
	switch {
	case v1 && v2 != "":
		return KindHybrid, v2, nil
	case v1:
		return KindV1, "", nil
	case v2 == cgroupRoot:
		return KindV2, "", nil
	}
	return "", "", fmt.Errorf("no cgroup hierarchy under %s", cgroupRoot)
}
