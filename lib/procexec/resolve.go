package procexec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"hostkit.dev/lib/wire"
)

// SearchPath is where Resolve looks up a bare name, in order. $PATH is
// never consulted.
var SearchPath = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// maxSymlinks bounds the symlinks Resolve follows (as Linux's MAXSYMLINKS).
const maxSymlinks = 40

// Resolve returns the absolute, symlink-free path of the executable name
// and checks it: name is absolute, or a bare name found in SearchPath (the
// first candidate that exists decides; an unsafe one is not skipped). Every
// component is examined with lstat(2) from "/": each directory must be
// owned by root and not writable by group or others; a symlink is read and
// its target walked and checked the same way; the final file must be a
// regular file with an execute bit, owned by root and not writable by
// group or others.
//
// Errors: CodeUnresolved (not absolute, missing, not a regular executable
// file, a loop) and CodeExecutableUnsafe (ownership or mode). Messages name
// the offending path.
func Resolve(name string) (string, error) {
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return "", wire.Errorf(CodeUnresolved, "empty or malformed executable name")
	}
	if strings.IndexByte(name, '/') < 0 {
		for _, dir := range SearchPath {
			p, err := resolveAbs(dir + "/" + name)
			if err == nil || !errors.Is(err, fs.ErrNotExist) {
				return p, err
			}
		}
		return "", wire.Errorf(CodeUnresolved, "executable %q not found in the search path", name)
	}
	if !filepath.IsAbs(name) {
		return "", wire.Errorf(CodeUnresolved, "executable path is not absolute")
	}
	return resolveAbs(name)
}

// resolveAbs walks the absolute path p component by component.
func resolveAbs(p string) (string, error) {
	if err := checkNode("/", nil); err != nil {
		return "", err
	}
	pending := split(p)
	cur := "/"
	hops := 0
	for len(pending) > 0 {
		comp := pending[0]
		pending = pending[1:]
		switch comp {
		case ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // already checked on the way down
			continue
		}
		next := filepath.Join(cur, comp)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", wire.Wrap(CodeUnresolved, "executable path "+quote(next)+" cannot be examined", err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if hops++; hops > maxSymlinks {
				return "", wire.Errorf(CodeUnresolved, "too many symlinks resolving the executable")
			}
			target, err := os.Readlink(next)
			if err != nil {
				return "", wire.Wrap(CodeUnresolved, "cannot read symlink "+quote(next), err)
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			pending = append(split(target), pending...)
		case fi.IsDir():
			if err := checkNode(next, fi); err != nil {
				return "", err
			}
			cur = next
		case fi.Mode().IsRegular() && len(pending) == 0:
			cur = next
		default:
			return "", wire.Errorf(CodeUnresolved, "executable path %s: not a directory or regular file where expected", quote(next))
		}
	}
	fi, err := os.Lstat(cur)
	if err != nil {
		return "", wire.Wrap(CodeUnresolved, "executable "+quote(cur)+" cannot be examined", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", wire.Errorf(CodeUnresolved, "executable %s is not an executable regular file", quote(cur))
	}
	if err := checkNode(cur, fi); err != nil {
		return "", err
	}
	return cur, nil
}

// checkNode requires p (described by fi, or lstat'ed when fi is nil) to be
// owned by root and not writable by group or others.
func checkNode(p string, fi fs.FileInfo) error {
	if fi == nil {
		var err error
		if fi, err = os.Lstat(p); err != nil {
			return wire.Wrap(CodeUnresolved, "executable path "+quote(p)+" cannot be examined", err)
		}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return wire.Errorf(CodePlatformUnsupported, "file ownership is not available")
	}
	if st.Uid != 0 {
		return wire.Errorf(CodeExecutableUnsafe, "%s is not owned by root", quote(p))
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return wire.Errorf(CodeExecutableUnsafe, "%s is writable by group or others", quote(p))
	}
	return nil
}

// split returns the non-empty components of a slash-separated path.
func split(p string) []string {
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// quote formats a path for a message (paths are not secrets, but are still
// passed through the text policy).
func quote(p string) string { return "\"" + strings.ReplaceAll(p, "\"", "\\\"") + "\"" }
