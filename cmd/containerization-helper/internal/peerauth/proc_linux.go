package peerauth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/procstat"
)

// deletedSuffix is what the kernel appends to /proc/<pid>/exe's link
// target once the file was unlinked (proc(5)).
const deletedSuffix = " (deleted)"

// inspect reads pid's executable: its path as the kernel reports it, the
// SHA-256 of the file the process runs, and a refusal reason ("" when the
// file is the one at that path and the pid stayed the same process).
func (a *Authenticator) inspect(pid int) (exe string, sum [32]byte, reason string) {
	if pid <= 0 {
		return "", sum, ReasonUnreadable
	}
	proc := "/proc/" + strconv.Itoa(pid)
	before, err := procstat.Read(pid)
	if err != nil {
		return "", sum, ReasonUnreadable
	}
	exe, err = os.Readlink(proc + "/exe")
	if err != nil {
		return "", sum, ReasonUnreadable
	}
	if path, ok := strings.CutSuffix(exe, deletedSuffix); ok {
		// The dentry the peer was started from is gone: unlinked, or a new
		// file was renamed over it.
		if _, err := os.Lstat(path); err == nil {
			return exe, sum, ReasonReplaced
		}
		return exe, sum, ReasonDeleted
	}
	f, err := os.Open(proc + "/exe") // the inode the process runs, whatever the path now holds
	if err != nil {
		return exe, sum, ReasonUnreadable
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return exe, sum, ReasonUnreadable
	}
	if st.Nlink == 0 {
		return exe, sum, ReasonDeleted
	}
	// The path the peer was started from must still name the same file: a
	// binary renamed over it (the only way to "change" a running binary)
	// is a new inode.
	var disk unix.Stat_t
	if err := unix.Stat(exe, &disk); err != nil || disk.Dev != st.Dev || disk.Ino != st.Ino {
		return exe, sum, ReasonReplaced
	}
	if st.Size > MaxExeBytes {
		return exe, sum, ReasonTooLarge
	}
	k := keyOf(&st)
	if d, ok := a.lookup(k); ok {
		sum = d
	} else {
		if sum, err = hashFile(f); err != nil {
			return exe, sum, ReasonUnreadable
		}
		a.store(k, sum)
	}
	// The process behind pid must be the one that was looked at: a pid
	// recycled meanwhile has another start time.
	after, err := procstat.Read(pid)
	if err != nil || after.StartTime != before.StartTime {
		return exe, sum, ReasonPidChanged
	}
	return exe, sum, ""
}

func keyOf(st *unix.Stat_t) fileKey {
	return fileKey{dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size, mtimeNS: st.Mtim.Nano(), ctimeNS: st.Ctim.Nano()}
}

// hashFile hashes f from its start, at most MaxExeBytes.
func hashFile(f *os.File) ([32]byte, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, MaxExeBytes+1))
	if err != nil {
		return [32]byte{}, err
	}
	if n > MaxExeBytes {
		return [32]byte{}, errors.New("executable is too large")
	}
	return [32]byte(h.Sum(nil)), nil
}

// hashPath hashes the regular file at path.
func hashPath(path string) ([32]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return [32]byte{}, err
	}
	if !fi.Mode().IsRegular() {
		return [32]byte{}, fmt.Errorf("%s is not a regular file", path)
	}
	return hashFile(f)
}

// SelfCheck watches the helper's own binary: the file at the path the
// helper was started from must stay the inode it runs. Replacing the
// binary (a package upgrade renames a new file over it) or deleting it
// makes Check fail; the helper then stops serving and exits non-zero, so
// the service manager starts the new binary on the next connection rather
// than the old code serving on.
type SelfCheck struct {
	Path   string   // the path the kernel reports for /proc/self/exe at start
	SHA256 [32]byte // of the running binary, at start
	key    fileKey
}

// NewSelfCheck records the running binary's identity.
func NewSelfCheck() (*SelfCheck, error) {
	path, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("peerauth: own executable: %w", err)
	}
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("peerauth: own executable: %w", err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, fmt.Errorf("peerauth: own executable: %w", err)
	}
	sum, err := hashFile(f)
	if err != nil {
		return nil, fmt.Errorf("peerauth: own executable: %w", err)
	}
	return &SelfCheck{Path: path, SHA256: sum, key: selfKey(&st)}, nil
}

// Check reports (as an error saying what changed) whether the binary at
// Path is no longer the one this process runs. Cheap: one readlink and
// one stat.
func (s *SelfCheck) Check() error {
	link, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("cannot read /proc/self/exe: %w", err)
	}
	if strings.HasSuffix(link, deletedSuffix) {
		return fmt.Errorf("binary %s was deleted or replaced", s.Path)
	}
	var st unix.Stat_t
	if err := unix.Stat(s.Path, &st); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("binary %s was removed", s.Path)
		}
		return fmt.Errorf("cannot stat %s: %w", s.Path, err)
	}
	if selfKey(&st) != s.key {
		return fmt.Errorf("binary %s was replaced", s.Path)
	}
	return nil
}

// selfKey is keyOf without ctime: the running binary cannot be written
// (ETXTBSY), so only a new inode or a change of size or mtime means a new
// binary, while ctime also moves on chmod, chown or a new hard link, which
// must not make the helper exit.
func selfKey(st *unix.Stat_t) fileKey {
	k := keyOf(st)
	k.ctimeNS = 0
	return k
}
