package buildtest

import (
	"errors"
	"io"
	"os"

	"hostkit.dev/lib/wire"
)

// Link makes dst another name of the file src: a hard link, which costs
// nothing and keeps the cache's read-only mode, or a copy with src's
// permission bits where the two are on different file systems. A process
// started from dst sees dst as its executable (/proc/self/exe,
// os.Executable), which is what tests that place binaries side by side
// rely on. dst must not exist.
//
// Errors: CodeIO when dst exists or src cannot be linked or copied.
func Link(src, dst string) error {
	err := os.Link(src, dst)
	if err == nil {
		return nil
	}
	if errors.Is(err, os.ErrExist) {
		return wire.Wrap(CodeIO, "link: "+err.Error(), err)
	}
	if err := copyFile(src, dst); err != nil {
		return wire.Wrap(CodeIO, "copy: "+err.Error(), err)
	}
	return nil
}

// copyFile copies src to a new file dst with src's permission bits, and
// removes dst again if the copy fails.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(dst)
	}
	return err
}
