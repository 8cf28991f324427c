// Package sock provides hostkit's private Unix sockets: a verified private
// directory, an flock(2) that keeps two daemons off one socket, safe removal
// of a stale socket, a socket whose mode is right before it serves (without
// touching the process umask), peer credentials read from the kernel on every
// accepted connection (SO_PEERCRED, unix(7), on Linux; LOCAL_PEERCRED and
// LOCAL_PEERPID on macOS), and systemd socket activation (sd_listen_fds(3)).
//
// The package builds only on linux and darwin; other platforms fail to
// compile on purpose, because they cannot report peer credentials.
//
// Every error it returns is a *wire.Error carrying one of the codes below (or
// wire.CodeUnavailable from Dial); codes are API and append-only.
package sock

// Error codes (stable `area.reason` strings, append-only; each is listed in
// docs/protocol.md).
const (
	// CodeActivationInvalid: a socket passed by the service manager is not a
	// listening Unix stream socket, or a requested name was not passed.
	CodeActivationInvalid = "sock.activation_invalid"
	// CodeAlreadyRunning: another process holds the socket's lock file.
	CodeAlreadyRunning = "sock.already_running"
	// CodeConfigInvalid: a Config, path or name is malformed (relative path,
	// unsupported mode, mode needing a group without one, group not settable).
	CodeConfigInvalid = "sock.config_invalid"
	// CodeDirUnsafe: the socket directory is a symlink, not a directory, owned
	// by another user, or has a mode or group other than the configured one.
	CodeDirUnsafe = "sock.dir_unsafe"
	// CodeListenFailed: socket(2), bind(2), chmod(2) or listen(2) failed.
	CodeListenFailed = "sock.listen_failed"
	// CodeLockUnsafe: the lock file could not be opened as a regular file
	// (it is a symlink, FIFO, directory, ...), or flock(2) failed.
	CodeLockUnsafe = "sock.lock_unsafe"
	// CodePathExists: something other than a provably stale socket exists at
	// the socket path; it was left untouched.
	CodePathExists = "sock.path_exists"
	// CodePathTooLong: the socket path exceeds MaxPathLen bytes.
	CodePathTooLong = "sock.path_too_long"
	// CodePeerUnknown: the kernel did not report usable peer credentials
	// (pid <= 0, or the overflow uid 65534 when that is not allowed).
	CodePeerUnknown = "sock.peer_unknown"
)

// Codes lists every code above in sorted order; a test keeps it sorted and
// unique.
var Codes = []string{
	CodeActivationInvalid,
	CodeAlreadyRunning,
	CodeConfigInvalid,
	CodeDirUnsafe,
	CodeListenFailed,
	CodeLockUnsafe,
	CodePathExists,
	CodePathTooLong,
	CodePeerUnknown,
}
