//go:build linux || darwin

package sock

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// lockSuffix names the lock file that sits next to a socket.
const lockSuffix = ".lock"

// acquireLock opens (creating 0600 if missing; O_NOFOLLOW, O_CLOEXEC,
// O_NONBLOCK so a FIFO cannot block us) the lock file at path, checks that it
// is a regular file, and takes flock(LOCK_EX|LOCK_NB) on it (flock(2)). The
// lock lasts until the returned file is closed. The lock file is never
// removed: unlinking a lock file races with the next locker.
//
// Errors: sock.already_running when another open file description holds the
// lock, sock.lock_unsafe otherwise.
func acquireLock(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, wire.Wrap(CodeLockUnsafe, "cannot open lock file "+path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, wire.Wrap(CodeLockUnsafe, "cannot inspect lock file "+path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, wire.Errorf(CodeLockUnsafe, "lock file %s is not a regular file", path)
	}
	for {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, wire.Wrap(CodeAlreadyRunning, "another process holds "+path+"; is the daemon already running?", err)
		}
		return nil, wire.Wrap(CodeLockUnsafe, "cannot lock "+path, err)
	}
	return f, nil
}
