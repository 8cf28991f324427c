package procexec

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// files returns an unnamed read-write file in the private directory for
// each stream that needs one (nil for the others), making the directory
// first when it does not exist yet or is gone.
func (d *outDir) files(needOut, needErr bool) (stdout, stderr *os.File, err error) {
	dirfd, err := d.open()
	if err != nil {
		return nil, nil, err
	}
	if needOut {
		if stdout, err = unnamedFile(dirfd); err != nil {
			return nil, nil, err
		}
	}
	if needErr {
		if stderr, err = unnamedFile(dirfd); err != nil {
			if stdout != nil {
				stdout.Close()
			}
			return nil, nil, err
		}
	}
	return stdout, stderr, nil
}

// open returns the directory's descriptor, valid until the next close: the
// directory made earlier if fstat says it is still a private directory of
// this user with a link, else a new one (MkdirTemp under parent, then
// checked the same way through its own descriptor).
func (d *outDir) open() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.f != nil {
		if private(int(d.f.Fd())) == nil {
			return int(d.f.Fd()), nil
		}
		d.f.Close() // removed or tampered with: start again
		os.Remove(d.path)
		d.f, d.path = nil, ""
	}
	dir, err := os.MkdirTemp(d.parent, "hk-procexec-")
	if err != nil {
		return -1, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		if err = private(fd); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		os.Remove(dir)
		return -1, err
	}
	d.f, d.path = os.NewFile(uintptr(fd), dir), dir
	return fd, nil
}

// private reports why the open directory fd is not a linked 0700
// directory of this process's effective user (nil when it is).
func private(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o7777 != 0o700 || int(st.Uid) != os.Geteuid() || st.Nlink == 0 {
		return fmt.Errorf("output directory is not private")
	}
	return nil
}

// unnamedFile returns a read-write file in the directory dirfd that has no
// name: O_TMPFILE|O_EXCL (it can never be linked into the file system), or,
// where O_TMPFILE is unsupported, an exclusive create followed by unlink.
func unnamedFile(dirfd int) (*os.File, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), "(unnamed)"), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return nil, &fs.PathError{Op: "open O_TMPFILE", Path: "(output directory)", Err: err}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "out-" + hex.EncodeToString(b[:])
	fd, err = unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: "(output directory)", Err: err}
	}
	if err := unix.Unlinkat(dirfd, name, 0); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "unlink", Path: "(output directory)", Err: err}
	}
	return os.NewFile(uintptr(fd), "(unnamed)"), nil
}

// markCloexec sets FD_CLOEXEC on every descriptor above 2, so the child
// inherits only 0, 1 and 2 (close_range(2) with CLOSE_RANGE_CLOEXEC, or
// each entry of /proc/self/fd on kernels before 5.11).
func markCloexec() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // closed meanwhile (the directory's own fd)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
			return err
		}
	}
	return nil
}

// procStat is the part of /proc/<pid>/stat the group cleanup needs.
type procStat struct {
	state      byte
	ppid, pgrp int
}

// readProcStat parses /proc/<pid>/stat (proc(5)); the command name may
// contain spaces and parentheses, so fields are read after the last ')'.
func readProcStat(pid string) (procStat, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed stat")
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procStat{}, fmt.Errorf("malformed stat")
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp}, nil
}
