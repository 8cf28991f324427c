package harness

import (
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/moby/sys/mountinfo"
)

// parseMounts reads a mount table from text as hostMounts reads the
// host's.
func parseMounts(text string) ([]Mount, error) {
	ms, err := mountinfo.GetMountsFromReader(strings.NewReader(text), nil)
	return mountsOf(ms), err
}

func TestHostKind(t *testing.T) {
	t.Parallel()
	const (
		v1     = "30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
		v1b    = "31 25 0:27 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids\n"
		tmpfs  = "25 24 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
		unif   = "26 25 0:23 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
		v2root = "26 24 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
		inCtr  = "40 39 0:23 / /tmp/x/sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
	)
	tests := []struct {
		name, mi, kind, v2 string
	}{
		{name: "hybrid", mi: tmpfs + unif + v1 + v1b, kind: KindHybrid, v2: "/sys/fs/cgroup/unified"},
		{name: "v1", mi: tmpfs + v1 + v1b + inCtr, kind: KindV1},
		{name: "v2", mi: v2root, kind: KindV2},
		{name: "none", mi: inCtr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			ms, err := parseMounts(tt.mi)
			is.NoErr(err)
			kind, v2, err := HostKind(ms)
			if tt.kind == "" {
				is.True(err != nil)
				return
			}
			is.NoErr(err)
			is.Equal(kind, tt.kind)
			is.Equal(v2, tt.v2)
		})
	}
	_, err := parseMounts("1 2 3\n")
	is.New(t).True(err != nil) // a malformed line fails the whole table
	ms, err := parseMounts(`40 39 0:23 / /tmp/a\040b rw - tmpfs tmpfs rw,size=4k` + "\n")
	is.New(t).NoErr(err)
	is.New(t).Equal(ms, []Mount{{Point: "/tmp/a b", FSType: "tmpfs", Super: []string{"rw", "size=4k"}}})
}
