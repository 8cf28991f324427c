package sock

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestListenGroupWithoutChown runs Listen in the group modes in a child
// whose chown calls fail with EPERM (denyChown: what systemd's
// SystemCallFilter=~@privileged does), and in one without that filter.
// A socket and directory that already carry the group need no chown, so
// Listen succeeds under the filter; one that needs a different group is
// refused under the filter (the filter bites, and Listen reports which
// step) and changed without it (the chown happens when it is needed).
func TestListenGroupWithoutChown(t *testing.T) {
	t.Parallel()
	me := strconv.Itoa(os.Getegid())
	other := strconv.Itoa(otherID)
	tests := []struct {
		name    string
		deny    bool
		gid     string
		premade string // gid of a 0750 directory made before Listen; "" = none
		want    string // the child's line, with <dir> and <sock> for the paths
	}{
		{name: "own group, chown denied", deny: true, gid: me, want: "ok " + me + " " + me},
		{name: "own group, premade directory, chown denied", deny: true, gid: me, premade: me, want: "ok " + me + " " + me},
		{name: "other group, premade directory, chown denied", deny: true, gid: other, premade: other,
			want: "error sock.config_invalid eperm=true cannot give <sock> its group"},
		{name: "other group, chown denied", deny: true, gid: other,
			want: "error sock.config_invalid eperm=true cannot give directory <dir> its group"},
		{name: "other group, chown allowed", gid: other, want: "ok " + other + " " + other},
		{name: "other group, premade directory, chown allowed", gid: other, premade: other, want: "ok " + other + " " + other},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			dir := filepath.Join(tmpRoot(t), "d")
			path := filepath.Join(dir, "api.sock")
			if tc.premade != "" {
				gid, err := strconv.Atoi(tc.premade)
				is.NoErr(err)
				is.NoErr(os.Mkdir(dir, 0o700))
				is.NoErr(os.Lchown(dir, -1, gid))
				is.NoErr(os.Chmod(dir, DirModeGroup))
			}
			deny := "0"
			if tc.deny {
				deny = "1"
			}
			exe, err := os.Executable()
			is.NoErr(err)
			cmd := helper(exe, "listen-group", helperPathEnv+"="+path, helperGroupEnv+"="+tc.gid, helperDenyEnv+"="+deny)
			out, err := cmd.Output()
			is.NoErr(err) // the child ran to the end
			line, _, _ := strings.Cut(string(out), "\n")
			want := strings.NewReplacer("<dir>", dir, "<sock>", path).Replace(tc.want)
			is.Equal(line, want)
			if strings.HasPrefix(want, "error") {
				_, err := os.Lstat(path)
				is.True(os.IsNotExist(err)) // a refused socket is removed
			}
		})
	}
}

// TestDenyChownBites checks the test's own filter: under denyChown a
// chown that changes nothing fails too, which is why Listen must not make
// one (the fault found under systemd).
func TestDenyChownBites(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	exe, err := os.Executable()
	is.NoErr(err)
	root := tmpRoot(t)
	f := filepath.Join(root, "f")
	is.NoErr(os.WriteFile(f, nil, 0o600))
	cmd := helper(exe, "chown-same", helperPathEnv+"="+f)
	out, err := cmd.Output()
	is.NoErr(err)
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	is.Equal(lines, []string{"before: <nil>", "after: lchown " + f + ": operation not permitted"})
}
