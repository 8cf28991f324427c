package provider

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestValidID(t *testing.T) {
	t.Parallel()
	cases := []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"0", true},
		{"c1", true},
		{"a.b_c-d", true},
		{"hk-0123456789abcdef", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"../evil", false},
		{"..", false},
		{"a..b", false},
		{"a.", true},
		{".a", false},
		{"-a", false},
		{"_a", false},
		{"A", false},
		{"a/b", false},
		{"a b", false},
		{"a\x00", false},
		{"é", false},
		{"a\n", false},
	}
	for _, tc := range cases {
		t.Run(strconv.Quote(tc.id), func(t *testing.T) {
			is.New(t).Equal(ValidID(tc.id), tc.ok)
		})
	}
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
			ms, err := parseMountinfo(b)
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
		ms, err := parseMountinfo(b)
		is.NoErr(err)
		i := slices.IndexFunc(ms, func(m cgroupMount) bool { return slices.Contains(m.Opts, "cpuacct") })
		is.True(i >= 0)
		is.Equal(ms[i].Point, "/sys/fs/cgroup/cpuacct")
	})
	t.Run("this host", func(t *testing.T) {
		is := is.New(t)
		b, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil && runtime.GOOS != "linux" {
			t.Skip("no /proc on " + runtime.GOOS)
		}
		if err != nil {
			t.Fatal(err)
		}
		ms, err := parseMountinfo(b)
		is.NoErr(err)
		_, _, err = hostKind(ms)
		is.NoErr(err)
	})
	bad := []string{
		"no separator line\n",
		"1 2 0:1 / - cgroup cgroup rw\n", // too few fields before the separator
		"1 2 0:1 / /sys/fs/cgroup/x\\04 rw - cgroup cgroup rw\n",
		"1 2 0:1 / /sys/fs/cgroup/x\\999 rw - cgroup cgroup rw\n",
	}
	for _, in := range bad {
		_, err := parseMountinfo([]byte(in))
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

func TestParseProcCgroup(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	m, err := parseProcCgroup([]byte("9:name=systemd:/c1\n8:pids:/c1\n2:cpu,cpuacct:/x/y\n0::/\n"))
	is.NoErr(err)
	is.Equal(m["pids"], "/c1")
	is.Equal(m["cpuacct"], "/x/y")
	is.Equal(m["cpu"], "/x/y")
	is.Equal(m[""], "/")
	for _, in := range []string{"", "8:pids", "8:pids:rel", "8:pids:/a/../b", ":pids:/a"} {
		_, err := parseProcCgroup([]byte(in))
		is.True(err != nil)
	}
}

func TestParsePid(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"1": 1, "4194304": 4194304, "123\n": 123, "0": 0, "": 0, "01": 0,
		"-1": 0, "4194305": 0, "1\n\n": 0, " 1": 0, "1x": 0, "99999999": 0} {
		got, ok := parsePid(in)
		is.New(t).Equal(got, want)
		is.New(t).Equal(ok, want != 0)
	}
}

func FuzzParseMountinfo(f *testing.F) {
	for _, name := range []string{"mountinfo-hybrid.txt", "mountinfo-v1.txt", "mountinfo-v2.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := parseMountinfo(b)
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

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte("9:name=systemd:/c1\n8:pids:/c1\n0::/\n"))
	f.Add([]byte("0::/user.slice/session-1.scope\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseProcCgroup(b)
		if err != nil {
			return
		}
		for _, p := range m {
			if !cleanAbs(p) {
				t.Fatalf("path %q accepted", p)
			}
		}
	})
}

// A runtime's create or start message that quotes the container's own
// command line loses the quoted spans; other verbs' messages are kept.
func TestContainerTextHidesTheCommand(t *testing.T) {
	t.Parallel()
	p := &cli{name: "runc"}
	for _, tc := range []struct {
		v        verb
		in, want string
	}{
		{verbCreate, `unable to start container process: exec: "/nonexistent-ArgCanary99": stat /nonexistent-ArgCanary99: no such file`,
			`unable to start container process: exec: the container's command could not be run`},
		{verbStart, `cannot start "ArgCanary99`, `cannot start "…"`},
		{verbCreate, `no quotes here`, `no quotes here`},
		{verbDelete, `container "x" is running`, `container "x" is running`},
	} {
		if got := p.containerText(tc.v, tc.in); got != tc.want {
			t.Errorf("%s %q: got %q, want %q", tc.v.name, tc.in, got, tc.want)
		}
	}
}
