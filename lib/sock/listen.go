//go:build linux || darwin

package sock

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"hostkit.dev/lib/wire"
)

// Config describes a private socket. The zero value of every field but Path
// is a valid same-user setup (directory 0700, socket 0600) — except Group,
// whose zero means gid 0; set it to -1 when no group is wanted.
type Config struct {
	// Path is the socket's absolute path, at most MaxPathLen bytes; see Path
	// and CheckPath. The lock file is Path + ".lock".
	Path string
	// DirMode is the socket directory's mode: 0700 (also used when 0) or
	// 0750, which needs Group >= 0.
	DirMode os.FileMode
	// Group is the gid given to the directory (DirMode 0750) and the socket
	// (SocketMode 0660); -1 means none. It is ignored by the 0700/0600 modes.
	Group int
	// SocketMode is the socket's mode: 0600 (also used when 0) or 0660, which
	// needs Group >= 0.
	SocketMode os.FileMode
	// AllowOverflowUID accepts peers whose uid the kernel reports as the
	// overflow uid 65534 (a peer in a user namespace whose uid does not map
	// into ours). Off by default: such a peer's identity is unknown.
	AllowOverflowUID bool
	// OnReject, if not nil, is called (from the accepting goroutine) with the
	// sock.peer_unknown error of each connection that Accept closes because
	// its peer credentials are unusable, e.g. to log or audit it.
	OnReject func(error)
}

// normalize fills defaults and validates cfg.
func (cfg Config) normalize() (Config, error) {
	if cfg.DirMode == 0 {
		cfg.DirMode = DirModePrivate
	}
	if cfg.SocketMode == 0 {
		cfg.SocketMode = SocketModePrivate
	}
	if err := CheckPath(cfg.Path); err != nil {
		return cfg, err
	}
	switch {
	case cfg.DirMode != DirModePrivate && cfg.DirMode != DirModeGroup:
		return cfg, wire.Errorf(CodeConfigInvalid, "directory mode %#o is not 0700 or 0750", uint32(cfg.DirMode))
	case cfg.SocketMode != SocketModePrivate && cfg.SocketMode != SocketModeGroup:
		return cfg, wire.Errorf(CodeConfigInvalid, "socket mode %#o is not 0600 or 0660", uint32(cfg.SocketMode))
	case (cfg.DirMode == DirModeGroup || cfg.SocketMode == SocketModeGroup) && cfg.Group < 0:
		return cfg, wire.Errorf(CodeConfigInvalid, "modes 0750 and 0660 need a group")
	}
	return cfg, nil
}

// Listener is a private Unix socket listener. It implements net.Listener;
// Accept and AcceptConn return *Conn with the peer's kernel credentials.
// It is safe for concurrent use.
type Listener struct {
	ul    *net.UnixListener
	cfg   Config
	owned bool     // Listen created the path: remove it on Close if unchanged
	id    fileID   // identity of the socket inode Listen created
	lock  *os.File // holds flock on Path+".lock" while open; nil if not owned

	closeOnce sync.Once
	closeErr  error
}

// Listen creates the private socket described by cfg and returns a listener
// on it. In order it: validates cfg; makes or verifies the socket directory
// (EnsureDir); takes flock(LOCK_EX|LOCK_NB) on <Path>.lock for the listener's
// life; removes a leftover socket only if it is a socket (Lstat) and
// connect(2) to it is refused; binds the socket, sets its group and mode and
// only then listens, never touching the umask; and records the socket's
// inode for Close. ctx bounds the stale-socket probe.
//
// Errors: sock.config_invalid, sock.path_too_long, sock.dir_unsafe,
// sock.already_running, sock.lock_unsafe, sock.path_exists (the existing path
// is left untouched), sock.listen_failed.
func Listen(ctx context.Context, cfg Config) (*Listener, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	if err := EnsureDir(filepath.Dir(cfg.Path), cfg.DirMode, cfg.Group); err != nil {
		return nil, err
	}
	lock, err := acquireLock(cfg.Path + lockSuffix)
	if err != nil {
		return nil, err
	}
	if err := clearStale(ctx, cfg.Path); err != nil {
		lock.Close()
		return nil, err
	}
	ul, id, err := bindSocket(cfg.Path, cfg.SocketMode, cfg.Group)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return &Listener{ul: ul, cfg: cfg, owned: true, id: id, lock: lock}, nil
}

// FromListener wraps a listener this process did not create, typically one
// passed by systemd (Activated), so that Accept reads peer credentials. Only
// cfg.AllowOverflowUID and cfg.OnReject are used: no directory or lock is
// managed, and Close closes l without removing its path.
func FromListener(l *net.UnixListener, cfg Config) *Listener {
	l.SetUnlinkOnClose(false)
	return &Listener{ul: l, cfg: cfg}
}

// AcceptConn waits for the next connection whose peer credentials are usable
// (see PeerOf) and returns it with Peer filled from the kernel. A connection
// whose credentials are unusable is closed, reported to Config.OnReject, and
// skipped, so one hostile peer cannot stop an accept loop. Errors are those
// of (*net.UnixListener).AcceptUnix; after Close they match net.ErrClosed.
func (l *Listener) AcceptConn() (*Conn, error) {
	for {
		c, err := l.ul.AcceptUnix()
		if err != nil {
			return nil, err
		}
		p, err := PeerOf(c, l.cfg.AllowOverflowUID)
		if err != nil {
			c.Close()
			if l.cfg.OnReject != nil {
				l.cfg.OnReject(err)
			}
			continue
		}
		return &Conn{UnixConn: c, Peer: p}, nil
	}
}

// Accept implements net.Listener; the returned net.Conn is a *Conn.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptConn()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Addr implements net.Listener; it is a *net.UnixAddr.
func (l *Listener) Addr() net.Addr { return l.ul.Addr() }

// SetDeadline sets the deadline for Accept and AcceptConn; the zero time
// means none. See (*net.UnixListener).SetDeadline.
func (l *Listener) SetDeadline(t time.Time) error { return l.ul.SetDeadline(t) }

// Close stops listening. For a listener made by Listen it first removes the
// socket path, but only if it is still the socket inode (device, inode) that
// Listen created — a file or socket put there since is left alone — then
// closes the socket and releases the flock. The lock file stays. Calling
// Close again returns the first call's result.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		var errs []error
		if l.owned {
			if err := removeIfSame(l.cfg.Path, l.id); err != nil {
				errs = append(errs, err)
			}
		}
		if err := l.ul.Close(); err != nil {
			errs = append(errs, err)
		}
		if l.lock != nil {
			if err := l.lock.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}
