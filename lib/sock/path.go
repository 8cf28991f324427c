//go:build linux || darwin

package sock

import (
	"path/filepath"
	"strings"

	"hostkit.dev/lib/wire"
)

// SocketName is the file name of a daemon's API socket inside its directory.
const SocketName = "api.sock"

// Path returns a daemon's API socket path, <runDir>/<name>/api.sock (see
// docs/design.md, "Paths", for runDir). runDir must be absolute; name must be
// one non-empty path element (no "/", not "." or ".."). Errors:
// sock.config_invalid for a bad runDir or name, sock.path_too_long when the
// result exceeds MaxPathLen bytes.
func Path(runDir, name string) (string, error) {
	if !filepath.IsAbs(runDir) {
		return "", wire.Errorf(CodeConfigInvalid, "run directory %q is not an absolute path", runDir)
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return "", wire.Errorf(CodeConfigInvalid, "socket name %q is not a single path element", name)
	}
	p := filepath.Join(runDir, name, SocketName)
	if err := CheckPath(p); err != nil {
		return "", err
	}
	return p, nil
}

// CheckPath reports, as an error, whether path cannot be a hostkit socket
// path: it must be absolute, clean, free of NUL bytes, name a file (not "/")
// and be at most MaxPathLen bytes long. Errors: sock.config_invalid,
// sock.path_too_long. Use it for socket paths not built by Path, such as
// per-instance holder sockets.
func CheckPath(path string) error {
	switch {
	case !filepath.IsAbs(path):
		return wire.Errorf(CodeConfigInvalid, "socket path %q is not absolute", path)
	case filepath.Clean(path) != path || path == "/":
		return wire.Errorf(CodeConfigInvalid, "socket path %q is not a clean file path", path)
	case strings.IndexByte(path, 0) >= 0:
		return wire.Errorf(CodeConfigInvalid, "socket path contains a NUL byte")
	case len(path) > MaxPathLen:
		return wire.Errorf(CodePathTooLong, "socket path %q is %d bytes; the limit on this platform is %d", path, len(path), MaxPathLen)
	}
	return nil
}
