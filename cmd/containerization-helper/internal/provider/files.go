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

// prepareConsole creates the console log (0600) if missing, refusing a
// symlink or anything but a regular file, so the shell's `>>` in
// scriptConsole opens the file the provider checked. Its directory is the
// caller's and must not be writable by others (a swap between this check
// and the shell's open is then impossible for anyone but the caller).
// Errors: CodeInvalidArgument.
func prepareConsole(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return wire.Wrap(CodeInvalidArgument, "console log "+quote(path)+" cannot be opened as a regular file", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return wire.Wrap(CodeInvalidArgument, "console log "+quote(path)+" is not a regular file", err)
	}
	return nil
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
