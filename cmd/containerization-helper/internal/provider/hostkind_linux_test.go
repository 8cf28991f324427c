package provider

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/matryer/is"
	"github.com/moby/sys/mountinfo"
)

// mountsOf parses mountinfo text as New reads the host's table.
func mountsOf(b []byte) ([]cgroupMount, error) {
	ms, err := mountinfo.GetMountsFromReader(bytes.NewReader(b), mountinfo.FSTypeFilter("cgroup", "cgroup2"))
	return cgroupMounts(ms), err
}

func TestHostKind(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file, kind, v2 string
	}{
		{"mountinfo-hybrid.txt", HostCgroupHybrid, "/sys/fs/cgroup/unified"},
		{"mountinfo-v1.txt", HostCgroupV1, ""},
		{"mountinfo-v2.txt", HostCgroupV2, ""},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			is.NoErr(err)
			ms, err := mountsOf(b)
			is.NoErr(err)
			kind, v2, err := hostKind(ms)
			is.NoErr(err)
			is.Equal(kind, tc.kind)
			is.Equal(v2, tc.v2)
		})
	}
	t.Run("controllers", func(t *testing.T) {
		is := is.New(t)
		b, err := os.ReadFile(filepath.Join("testdata", "mountinfo-hybrid.txt"))
		is.NoErr(err)
		ms, err := mountsOf(b)
		is.NoErr(err)
		i := slices.IndexFunc(ms, func(m cgroupMount) bool { return slices.Contains(m.Opts, "cpuacct") })
		is.True(i >= 0)
		is.Equal(ms[i].Point, "/sys/fs/cgroup/cpuacct")
	})
	t.Run("this host", func(t *testing.T) {
		is := is.New(t)
		ms, err := mountinfo.GetMounts(nil)
		is.NoErr(err)
		_, _, err = hostKind(cgroupMounts(ms))
		is.NoErr(err)
	})
	for _, tc := range []struct {
		name, in string
		want     []cgroupMount
	}{
		{"escaped mount point", `31 23 0:28 / /sys/fs/cgroup/a\040b rw - cgroup cgroup rw,cpu` + "\n",
			[]cgroupMount{{Point: "/sys/fs/cgroup/a b", Opts: []string{"rw", "cpu"}}}},
		{"cleaned mount point", "31 23 0:28 / /sys/fs/cgroup/ rw - cgroup2 cgroup2 rw\n",
			[]cgroupMount{{Point: "/sys/fs/cgroup", V2: true, Opts: []string{"rw"}}}},
		{"outside /sys/fs/cgroup", "40 39 0:23 / /tmp/x/sys/fs/cgroup rw - cgroup2 cgroup2 rw\n" +
			"41 39 0:23 / /sys/fs/cgroupx rw - cgroup2 cgroup2 rw\n", nil},
		{"not a cgroup file system", "25 24 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			ms, err := mountsOf([]byte(tc.in))
			is.NoErr(err)
			is.Equal(ms, tc.want)
		})
	}
	// A malformed line fails the whole table.
	for _, in := range []string{
		"no separator line\n",
		"1 2 0:1 / - cgroup cgroup rw\n", // too few fields before the separator
		"1 2 0:1 / /sys/fs/cgroup/x\\04 rw - cgroup cgroup rw\n",
		"1 2 0:1 / /sys/fs/cgroup/x\\999 rw - cgroup cgroup rw\n",
	} {
		_, err := mountsOf([]byte(in))
		is.New(t).True(err != nil)
	}
	for _, ms := range [][]cgroupMount{
		nil,
		{{Point: "/sys/fs/cgroup/unified", V2: true}},
		{{Point: "/sys/fs/cgroup/cpu"}, {Point: "/sys/fs/cgroup/a", V2: true}, {Point: "/sys/fs/cgroup/b", V2: true}},
		{{Point: "/sys/fs/cgroup/cpu"}, {Point: "/sys/fs/cgroup", V2: true}},
	} {
		_, _, err := hostKind(ms)
		is.New(t).True(err != nil)
	}
}

// FuzzHostKind holds cgroupMounts and hostKind to their promises on any
// table the mountinfo package accepts: only mounts under /sys/fs/cgroup,
// and a second v2 mount point exactly for a hybrid host.
func FuzzHostKind(f *testing.F) {
	for _, name := range []string{"mountinfo-hybrid.txt", "mountinfo-v1.txt", "mountinfo-v2.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := mountsOf(b)
		if err != nil {
			return
		}
		for _, m := range ms {
			if !within(m.Point, cgroupRoot) {
				t.Fatalf("mount %q outside %s", m.Point, cgroupRoot)
			}
		}
		kind, v2, err := hostKind(ms)
		if err == nil && (kind == HostCgroupHybrid) != (v2 != "") {
			t.Fatalf("kind %s with v2 %q", kind, v2)
		}
	})
}
