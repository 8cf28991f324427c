package provider

import (
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
