package procexec

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// outputFile returns an anonymous in-memory file (memfd_create(2)) for one
// of the child's output streams. It has no name in any file system and
// costs no disk inode (on ext4 with many recently deleted files each
// O_TMPFILE cost ~0.3 ms). It is opened O_APPEND and not sealed: a child
// may reopen it by path (`>> /dev/stdout` appends; `> /dev/stdout`
// truncates, as it would a regular file), and how much it wrote is the
// file's size (written), which moving the offset back cannot hide. The
// output watcher bounds it softly: past its limit the group is killed
// within one watch interval (5 ms), so it may hold the limit plus what the
// child writes in that time.
func outputFile() (*os.File, error) {
	fd, err := unix.MemfdCreate("hk-procexec-out", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	// O_APPEND, as a shell's `>>` would: a child that reopens the file
	// (`echo x >> /dev/stderr`) writes after what its descriptor wrote,
	// not over it from a second offset.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_APPEND); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fcntl O_APPEND: %w", err)
	}
	return os.NewFile(uintptr(fd), "(output)"), nil
}

// outputFiles returns an output file for each stream that needs one (nil
// for the others).
func outputFiles(needOut, needErr bool) (stdout, stderr *os.File, err error) {
	if needOut {
		if stdout, err = outputFile(); err != nil {
			return nil, nil, err
		}
	}
	if needErr {
		if stderr, err = outputFile(); err != nil {
			if stdout != nil {
				stdout.Close()
			}
			return nil, nil, err
		}
	}
	return stdout, stderr, nil
}

// written returns f's size: how far the child wrote into it. It is 0 when
// f is nil (a caller-supplied file: neither read nor watched) or cannot be
// read.
func written(f *os.File) int64 {
	if f == nil {
		return 0
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return 0
	}
	return st.Size
}
