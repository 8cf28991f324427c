package procexec

import (
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// WorkDir is a working directory pinned by an open descriptor. The child
// starts in the directory the descriptor refers to, whatever happens to its
// path after OpenWorkDir. It is safe for concurrent use; Close releases it
// and waits for runs that are starting in it.
type WorkDir struct {
	path string
	mu   sync.RWMutex
	f    *os.File // nil once closed
}

// OpenWorkDir opens the absolute directory path and pins it. Every component
// is opened relative to its parent with O_DIRECTORY|O_NOFOLLOW, so a symlink
// anywhere in the path is refused, not followed. Errors: CodeWorkDirInvalid.
func OpenWorkDir(path string) (*WorkDir, error) {
	if !filepath.IsAbs(path) {
		return nil, wire.Errorf(CodeWorkDirInvalid, "working directory is not absolute")
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open("/", flags, 0)
	if err != nil {
		return nil, wire.Wrap(CodeWorkDirInvalid, "cannot open /", err)
	}
	for _, comp := range split(filepath.Clean(path)) {
		next, err := unix.Openat(fd, comp, flags, 0)
		unix.Close(fd)
		if err != nil {
			return nil, wire.Wrap(CodeWorkDirInvalid,
				"working directory "+quote(path)+" cannot be opened (missing, not a directory, or a symlink in its path)", err)
		}
		fd = next
	}
	return &WorkDir{path: filepath.Clean(path), f: os.NewFile(uintptr(fd), path)}, nil
}

// Path returns the path the directory was opened at (it may have moved
// since).
func (d *WorkDir) Path() string { return d.path }

// Close releases the descriptor; later runs with d fail with
// CodeWorkDirInvalid. Close is idempotent.
func (d *WorkDir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// hold locks d open for a start and returns its checked descriptor and the
// unlock function. The directory must still be a directory with links
// (not removed).
func (d *WorkDir) hold() (fd int, release func(), err error) {
	d.mu.RLock()
	if d.f == nil {
		d.mu.RUnlock()
		return -1, nil, wire.Errorf(CodeWorkDirInvalid, "working directory was closed")
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(d.f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Nlink == 0 {
		d.mu.RUnlock()
		return -1, nil, wire.Wrap(CodeWorkDirInvalid, "working directory was removed", err)
	}
	return int(d.f.Fd()), d.mu.RUnlock, nil
}
