//go:build linux || darwin

package sock

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// staleProbeTimeout bounds the connect(2) that decides whether a leftover
// socket is stale.
const staleProbeTimeout = 2 * time.Second

// fileID identifies an inode: the (device, inode) pair from lstat(2).
type fileID struct{ dev, ino uint64 }

// idOf returns fi's identity and whether fi is a Unix socket (not a symlink).
func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || fi.Mode().Type() != fs.ModeSocket {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: uint64(st.Ino)}, true
}

// clearStale removes a leftover socket at path. The caller holds the lock.
// It removes the path only when Lstat says it is a socket and connect(2) to it
// fails with ECONNREFUSED; a missing path is fine; anything else is
// sock.path_exists and the path is left untouched.
func clearStale(ctx context.Context, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return wire.Wrap(CodePathExists, "cannot inspect "+path, err)
	}
	id, isSock := idOf(fi)
	if !isSock {
		return wire.Errorf(CodePathExists, "%s exists and is not a socket (%s); refusing to remove it", path, fi.Mode().Type())
	}
	d := net.Dialer{Timeout: staleProbeTimeout}
	c, err := d.DialContext(ctx, "unix", path)
	if err == nil {
		c.Close()
		return wire.Errorf(CodePathExists, "a process is serving %s without holding its lock; refusing to replace it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return wire.Wrap(CodePathExists, "cannot tell whether "+path+" is stale; leaving it", err)
	}
	if err := removeIfSame(path, id); err != nil {
		return wire.Wrap(CodePathExists, "cannot remove stale socket "+path, err)
	}
	return nil
}

// removeIfSame removes path only if it is still the socket identified by id.
// A missing path, or one that now holds something else, is left alone.
func removeIfSame(path string, id fileID) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if got, ok := idOf(fi); !ok || got != id {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// bindSocket creates a listening socket at path whose mode (and, for 0660,
// group) is set before it can accept anything: socket(2), bind(2), chown
// (only when the new inode lacks the group) and chmod it, then listen(2). Until listen(2), connect(2) to the path
// is refused, so no peer can queue a connection while the mode is still the
// umask's; the umask itself is never touched. It returns the listener (which
// never unlinks on Close) and the socket's inode identity.
func bindSocket(path string, mode os.FileMode, group int) (*net.UnixListener, fileID, error) {
	syscall.ForkLock.RLock()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, fileID{}, wire.Wrap(CodeListenFailed, "cannot create a socket", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EADDRINUSE) {
			return nil, fileID{}, wire.Wrap(CodePathExists, path+" appeared while starting; refusing to replace it", err)
		}
		return nil, fileID{}, wire.Wrap(CodeListenFailed, "cannot bind "+path, err)
	}
	id, err := finishSocket(fd, path, mode, group)
	if err != nil {
		if id != (fileID{}) {
			_ = removeIfSame(path, id)
		}
		unix.Close(fd)
		return nil, fileID{}, err
	}
	f := os.NewFile(uintptr(fd), path)
	ln, err := net.FileListener(f) // dups fd
	f.Close()
	if err != nil {
		_ = removeIfSame(path, id)
		return nil, fileID{}, wire.Wrap(CodeListenFailed, "cannot listen on "+path, err)
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		ln.Close()
		_ = removeIfSame(path, id)
		return nil, fileID{}, wire.Errorf(CodeListenFailed, "%s did not yield a Unix listener", path)
	}
	ul.SetUnlinkOnClose(false)
	return ul, id, nil
}

// finishSocket sets the bound socket's group and mode, records its identity
// and starts listening. A non-zero fileID comes back with an error once the
// inode is known, so the caller can remove exactly what it created.
func finishSocket(fd int, path string, mode os.FileMode, group int) (fileID, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return fileID{}, wire.Wrap(CodeListenFailed, "cannot inspect "+path, err)
	}
	id, ok := idOf(fi)
	if !ok {
		return fileID{}, wire.Errorf(CodeListenFailed, "%s is not the socket just bound", path)
	}
	if mode == SocketModeGroup {
		if err := giveGroup(path, fi, group); err != nil {
			return id, wire.Wrap(CodeConfigInvalid, "cannot give "+path+" its group", err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		return id, wire.Wrap(CodeListenFailed, "cannot set the mode of "+path, err)
	}
	fi, err = os.Lstat(path)
	if err != nil {
		return id, wire.Wrap(CodeListenFailed, "cannot inspect "+path, err)
	}
	if got, _ := idOf(fi); got != id || fi.Mode().Perm() != mode {
		return id, wire.Errorf(CodeListenFailed, "%s changed while starting", path)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		return id, wire.Wrap(CodeListenFailed, "cannot listen on "+path, err)
	}
	return id, nil
}
