//go:build linux || darwin

package sock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"hostkit.dev/lib/wire"
)

// Directory and socket modes hostkit accepts.
const (
	// DirModePrivate: only the owning user may enter the directory.
	DirModePrivate os.FileMode = 0o700
	// DirModeGroup: the owning user and the configured group may enter it.
	DirModeGroup os.FileMode = 0o750
	// SocketModePrivate: only the owning user may connect.
	SocketModePrivate os.FileMode = 0o600
	// SocketModeGroup: the owning user and the configured group may connect.
	SocketModeGroup os.FileMode = 0o660
	// parentMode is used for missing parents of a private directory.
	parentMode os.FileMode = 0o755
)

// EnsureDir makes dir a private directory, or verifies that it already is one.
//
// mode is 0700 (DirModePrivate; also used when mode is 0) or 0750
// (DirModeGroup, which needs group >= 0); group is a gid, or -1 for none.
// A missing dir is created with Mkdir, given the group with Lchown (only when
// it does not have it already, see giveGroup), and set to exactly mode with
// Chmod, so the process umask is never read or changed;
// missing parents are created the same way with mode 0755. An existing dir is
// checked with Lstat and never modified: it must not be a symlink, must be a
// directory owned by the effective uid, have exactly mode (no setuid, setgid
// or sticky bit) and, for 0750, belong to group.
//
// Errors: sock.config_invalid (bad mode or group, relative dir),
// sock.dir_unsafe (anything above not met, or the directory could not be
// created).
func EnsureDir(dir string, mode os.FileMode, group int) error {
	if mode == 0 {
		mode = DirModePrivate
	}
	switch {
	case !filepath.IsAbs(dir):
		return wire.Errorf(CodeConfigInvalid, "directory %q is not an absolute path", dir)
	case mode != DirModePrivate && mode != DirModeGroup:
		return wire.Errorf(CodeConfigInvalid, "directory mode %#o is not 0700 or 0750", uint32(mode))
	case mode == DirModeGroup && group < 0:
		return wire.Errorf(CodeConfigInvalid, "directory mode 0750 needs a group")
	}
	dir = filepath.Clean(dir)
	if err := ensureParents(filepath.Dir(dir)); err != nil {
		return err
	}
	err := os.Mkdir(dir, DirModePrivate)
	switch {
	case err == nil:
		if err := setMode(dir, mode, group); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrExist):
		return wire.Wrap(CodeDirUnsafe, "cannot create directory "+dir, err)
	}
	return verifyDir(dir, mode, group)
}

// setMode gives a directory we just created its group and exact mode.
func setMode(dir string, mode os.FileMode, group int) error {
	if mode == DirModeGroup {
		fi, err := os.Lstat(dir)
		if err != nil {
			return wire.Wrap(CodeDirUnsafe, "cannot inspect directory "+dir, err)
		}
		if err := giveGroup(dir, fi, group); err != nil {
			return wire.Wrap(CodeConfigInvalid, "cannot give directory "+dir+" its group", err)
		}
	}
	if err := os.Chmod(dir, mode); err != nil {
		return wire.Wrap(CodeDirUnsafe, "cannot set the mode of directory "+dir, err)
	}
	return nil
}

// ensureParents creates the missing ancestors of a private directory, top
// down, each with mode exactly 0755. Existing ancestors are left alone.
func ensureParents(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return wire.Wrap(CodeDirUnsafe, "cannot inspect directory "+d, err)
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		err := os.Mkdir(d, parentMode)
		if errors.Is(err, fs.ErrExist) {
			continue // someone else made it meanwhile; not ours to change
		}
		if err == nil {
			err = os.Chmod(d, parentMode)
		}
		if err != nil {
			return wire.Wrap(CodeDirUnsafe, "cannot create directory "+d, err)
		}
	}
	return nil
}

// verifyDir checks an existing directory without following symlinks.
func verifyDir(dir string, mode os.FileMode, group int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return wire.Wrap(CodeDirUnsafe, "cannot inspect directory "+dir, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return wire.Errorf(CodeDirUnsafe, "%s is a symlink, not a private directory", dir)
	}
	if !fi.IsDir() {
		return wire.Errorf(CodeDirUnsafe, "%s is not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return wire.Errorf(CodeDirUnsafe, "cannot read the owner of %s", dir)
	}
	if euid := os.Geteuid(); int64(st.Uid) != int64(euid) {
		return wire.Errorf(CodeDirUnsafe, "%s is owned by uid %d, not by this process's uid %d", dir, st.Uid, euid)
	}
	got := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	if got != mode {
		return wire.Errorf(CodeDirUnsafe, "%s has mode %s, want exactly %s", dir, got, mode)
	}
	if mode == DirModeGroup && int64(st.Gid) != int64(group) {
		return wire.Errorf(CodeDirUnsafe, "%s belongs to gid %d, want %d", dir, st.Gid, group)
	}
	return nil
}

// giveGroup gives path, whose Lstat is fi, the group gid, and calls
// lchown(2) only when path does not have it already. A file takes its
// creator's effective gid, which under a service manager's Group= is
// usually the group wanted; and a seccomp filter that denies the chown
// family (systemd's SystemCallFilter=~@privileged) refuses even a chown
// that would change nothing, so the call must not be made then.
func giveGroup(path string, fi fs.FileInfo, gid int) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("cannot read the group of " + path)
	}
	if int64(st.Gid) == int64(gid) {
		return nil
	}
	return os.Lchown(path, -1, gid)
}
