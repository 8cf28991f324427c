package procexec

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// checkOutputFiles checks the caller-supplied output files of spec (see
// CommandSpec.Stdout): each given one must be an open regular file whose
// status flags hold O_APPEND and a write access mode. Errors:
// CodeInvalidSpec; messages name the stream, never the file's path.
func checkOutputFiles(spec *CommandSpec) error {
	for _, o := range []struct {
		name string
		f    *os.File
	}{{"stdout", spec.Stdout}, {"stderr", spec.Stderr}} {
		if o.f == nil {
			continue
		}
		if err := appendOnlyRegular(o.f); err != nil {
			return wire.Wrap(CodeInvalidSpec, spec.Purpose+": the "+o.name+" file must be an open regular file opened O_APPEND for writing", err)
		}
	}
	return nil
}

// appendOnlyRegular reports why f is not an open, writable, O_APPEND
// regular file (nil when it is). It reads the descriptor's own state, so a
// file renamed or replaced at its path since it was opened changes nothing.
func appendOnlyRegular(f *os.File) error {
	sc, err := f.SyscallConn() // fails for a closed *os.File; never changes its blocking mode
	if err != nil {
		return err
	}
	var st unix.Stat_t
	var flags int
	var opErr error
	if err := sc.Control(func(fd uintptr) {
		if opErr = unix.Fstat(int(fd), &st); opErr != nil {
			return
		}
		flags, opErr = unix.FcntlInt(fd, unix.F_GETFL, 0)
	}); err != nil {
		return err
	}
	switch {
	case opErr != nil:
		return opErr
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errNotRegular
	case flags&unix.O_APPEND == 0:
		return errNotAppend
	case flags&unix.O_ACCMODE == unix.O_RDONLY:
		return errNotWritable
	}
	return nil
}

// The reasons appendOnlyRegular gives (wrapped causes, never sent).
var (
	errNotRegular  = errors.New("not a regular file")
	errNotAppend   = errors.New("not opened with O_APPEND")
	errNotWritable = errors.New("not opened for writing")
)
