package provider

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"hostkit.dev/lib/wire"
)

// openConsole opens the console log for appending, creating it 0600 if
// missing, refusing a symlink or anything but a regular file; the runtime
// gets this very descriptor (so no path is opened twice). Errors:
// CodeInvalidArgument.
func openConsole(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, wire.Wrap(CodeInvalidArgument, "console log "+quote(path)+" cannot be opened as a regular file", err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, wire.Wrap(CodeInvalidArgument, "console log "+quote(path)+" is not a regular file", err)
	}
	return f, nil
}

// readRegular reads the regular file at path (not through a symlink), at
// most limit bytes; a larger file is an error. A missing file is
// fs.ErrNotExist.
func readRegular(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("over %d bytes", limit)
	}
	return b, err
}

// readPidFile reads a runtime's --pid-file: a decimal pid, optionally
// followed by a newline (runc writes none, crun none either).
func readPidFile(path string) (int, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return 0, false
	}
	return parsePid(string(b))
}

// parsePid parses a pid in [1, 2^22], with at most one trailing newline.
func parsePid(s string) (int, bool) {
	s = strings.TrimSuffix(s, "\n")
	if s == "" || len(s) > 7 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 1<<22 {
		return 0, false
	}
	return n, true
}
