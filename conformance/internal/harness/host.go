package harness

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
)

// Host kinds, as internal/provider names them.
const (
	KindV1     = "cgroup-v1"
	KindHybrid = "cgroup-hybrid"
	KindV2     = "cgroup-v2"
)

const cgroupRoot = "/sys/fs/cgroup"

// Mount is one line of /proc/self/mountinfo (proc(5)).
type Mount struct {
	Point  string
	FSType string
	Super  []string // super options (v1 cgroups: the controllers)
}

// ParseMountinfo parses mountinfo text. A malformed line is an error: the
// host kind is never guessed from a partial table.
func ParseMountinfo(b []byte) ([]Mount, error) {
	var out []Mount
	for n, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		pre, post, ok := strings.Cut(string(line), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 3 {
			return nil, fmt.Errorf("mountinfo line %d malformed", n+1)
		}
		point, err := unescape(f[4])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", n+1, err)
		}
		out = append(out, Mount{Point: point, FSType: g[0], Super: strings.Split(g[2], ",")})
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space, ...).
func unescape(s string) (string, error) {
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
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
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
