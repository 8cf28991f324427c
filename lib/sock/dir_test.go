package sock

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// otherID is a uid and gid that is not ours (tests run as root).
const otherID = 65533

func TestEnsureDir(t *testing.T) {
	t.Parallel()
	mkdir := func(mode os.FileMode, uid, gid int) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, uid, gid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	me, myGroup := os.Geteuid(), os.Getegid()
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) // nil: dir does not exist
		mode    os.FileMode
		group   int
		code    string
		wantDir os.FileMode // mode of dir afterwards (0: it must not be a dir)
		wantGid int
	}{
		{name: "missing created 0700", mode: 0, group: -1, wantDir: 0o700, wantGid: myGroup},
		{name: "missing created 0750 with group", mode: 0o750, group: otherID, wantDir: 0o750, wantGid: otherID},
		{name: "existing 0700", setup: mkdir(0o700, me, myGroup), mode: 0o700, group: -1, wantDir: 0o700, wantGid: myGroup},
		{name: "existing 0750 with group", setup: mkdir(0o750, me, otherID), mode: 0o750, group: otherID, wantDir: 0o750, wantGid: otherID},
		{name: "0750 wrong group", setup: mkdir(0o750, me, myGroup), mode: 0o750, group: otherID, code: CodeDirUnsafe, wantDir: 0o750, wantGid: myGroup},
		{name: "mode 0777", setup: mkdir(0o777, me, myGroup), mode: 0o700, group: -1, code: CodeDirUnsafe, wantDir: 0o777, wantGid: myGroup},
		{name: "ours but 0755", setup: mkdir(0o755, me, myGroup), mode: 0o700, group: -1, code: CodeDirUnsafe, wantDir: 0o755, wantGid: myGroup},
		{name: "0700 wanted 0750", setup: mkdir(0o700, me, otherID), mode: 0o750, group: otherID, code: CodeDirUnsafe, wantDir: 0o700, wantGid: otherID},
		{name: "setgid bit", setup: mkdir(0o700|os.ModeSetgid, me, myGroup), mode: 0o700, group: -1, code: CodeDirUnsafe, wantDir: 0o700 | os.ModeSetgid, wantGid: myGroup},
		{name: "owned by another user", setup: mkdir(0o700, otherID, otherID), mode: 0o700, group: -1, code: CodeDirUnsafe, wantDir: 0o700, wantGid: otherID},
		{name: "symlink to private dir", setup: func(t *testing.T, dir string) {
			mkdir(0o700, me, myGroup)(t, dir+".real")
			if err := os.Symlink(dir+".real", dir); err != nil {
				t.Fatal(err)
			}
		}, mode: 0o700, group: -1, code: CodeDirUnsafe},
		{name: "regular file", setup: func(t *testing.T, dir string) {
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, mode: 0o700, group: -1, code: CodeDirUnsafe},
		{name: "mode 0755 requested", mode: 0o755, group: -1, code: CodeConfigInvalid},
		{name: "0750 without group", mode: 0o750, group: -1, code: CodeConfigInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			dir := filepath.Join(tmpRoot(t), "d")
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			err := EnsureDir(dir, tc.mode, tc.group)
			is.Equal(wire.CodeOf(err), tc.code)
			fi, err := os.Lstat(dir)
			if tc.wantDir == 0 {
				is.True(err != nil || !fi.IsDir()) // not turned into a directory
				return
			}
			is.NoErr(err)
			is.True(fi.IsDir())
			_, st := statOf(t, dir)
			is.Equal(fi.Mode()&(os.ModePerm|os.ModeSetgid), tc.wantDir) // exact, and never "fixed"
			is.Equal(int(st.Gid), tc.wantGid)
		})
	}
}

func TestEnsureDirLeavesSymlinkAndForeignDir(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := tmpRoot(t)
	real, link := filepath.Join(root, "real"), filepath.Join(root, "link")
	is.NoErr(os.Mkdir(real, 0o777))
	is.NoErr(os.Chmod(real, 0o777))
	is.NoErr(os.Chown(real, otherID, otherID))
	is.NoErr(os.Symlink(real, link))

	is.Equal(wire.CodeOf(EnsureDir(link, 0o700, -1)), CodeDirUnsafe)
	is.Equal(wire.CodeOf(EnsureDir(real, 0o700, -1)), CodeDirUnsafe)
	target, err := os.Readlink(link)
	is.NoErr(err)
	is.Equal(target, real)
	fi, st := statOf(t, real)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o777))
	is.Equal(st.Uid, uint32(otherID))
}

func TestEnsureDirCreatesParents0755(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := tmpRoot(t)
	dir := filepath.Join(root, "a", "b", "d")
	is.NoErr(EnsureDir(dir, 0, -1))
	for _, p := range []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b")} {
		fi, _ := statOf(t, p)
		is.Equal(fi.Mode().Perm(), os.FileMode(0o755))
	}
	fi, _ := statOf(t, dir)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o700))
}
