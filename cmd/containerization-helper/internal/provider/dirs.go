package provider

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"hostkit.dev/lib/wire"
)

// cleanAbs reports whether p is absolute, clean and free of NUL.
func cleanAbs(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsRune(p, 0)
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// ensurePrivateDir makes dir (mode 0700, owned by this process's effective
// user) unless it exists, then checks it: a real directory, that owner,
// mode exactly 0700. Every directory above it must be a real directory
// (no symlink) owned by root or this user and not writable by group or
// others unless sticky (so /tmp, 1777, is acceptable for tests: nobody
// else can rename or remove a root-owned entry in it). Errors:
// CodeUnavailable, naming what is wrong.
func ensurePrivateDir(dir string) error {
	bad := func(format string, args ...any) error { return wire.Errorf(CodeUnavailable, format, args...) }
	euid := uint32(os.Geteuid())
	parent := filepath.Dir(dir)
	for p := "/"; ; {
		st, err := lstatDir(p)
		if err != nil {
			return wire.Wrap(CodeUnavailable, "directory "+quote(p)+" above "+quote(dir)+" is missing or not a directory", err)
		}
		if st.Uid != 0 && st.Uid != euid {
			return bad("directory %s above %s is owned by uid %d", quote(p), quote(dir), st.Uid)
		}
		if st.Mode&0o022 != 0 && st.Mode&syscall.S_ISVTX == 0 {
			return bad("directory %s above %s is writable by group or others", quote(p), quote(dir))
		}
		if p == parent {
			break
		}
		rest := strings.TrimPrefix(parent, strings.TrimSuffix(p, "/")+"/")
		first, _, _ := strings.Cut(rest, "/")
		p = filepath.Join(p, first)
	}
	if err := os.Mkdir(dir, 0o700); err == nil {
		if err := os.Chmod(dir, 0o700); err != nil { // the umask may have cleared bits
			return wire.Wrap(CodeUnavailable, "cannot set the mode of "+quote(dir), err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return wire.Wrap(CodeUnavailable, "cannot create "+quote(dir), err)
	}
	st, err := lstatDir(dir)
	if err != nil {
		return wire.Wrap(CodeUnavailable, quote(dir)+" is not a directory (or is a symlink)", err)
	}
	if st.Uid != euid || st.Mode&0o7777 != 0o700 {
		return bad("%s must be a directory of uid %d with mode 0700 (it has uid %d, mode %#o)", quote(dir), euid, st.Uid, st.Mode&0o7777)
	}
	return nil
}

// lstatDir returns the stat of p, which must be a directory and not a
// symlink.
func lstatDir(p string) (*syscall.Stat_t, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() {
		return nil, errors.New("not a directory")
	}
	return st, nil
}

// quote quotes a path for a message.
func quote(p string) string {
	if len(p) > 200 {
		p = p[:200] + "..."
	}
	return "\"" + strings.ToValidUTF8(p, "?") + "\""
}
