package procexec

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// outputFile returns an anonymous in-memory file (memfd_create(2)) for one
// of the child's output streams, capped at outputCap(limit) bytes: it is
// sized once (sparse: no memory is used until written) and sealed against
// growing and shrinking (F_SEAL_GROW|F_SEAL_SHRINK|F_SEAL_SEAL, fcntl(2)),
// so a write past the cap fails with EPERM and a runaway child can hold at
// most the cap in memory, however fast it writes. The file has no
// name in any file system and costs no disk inode (which, on ext4 with
// many recently deleted files, made each O_TMPFILE cost ~0.3 ms). How
// much the child wrote is the shared file offset (written).
func outputFile(limit int64) (*os.File, error) {
	fd, err := unix.MemfdCreate("hk-procexec-out", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "(output)")
	if err := unix.Ftruncate(fd, outputCap(limit)); err != nil {
		f.Close()
		return nil, fmt.Errorf("ftruncate: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal: %w", err)
	}
	return f, nil
}

// outputCap is an output file's size: limit+1 rounded up to a whole page.
// shmem checks a sealed file's size page by page (a write is copied in
// chunks that end at page boundaries), so with a page-aligned size every
// byte below it can be written: a child that writes more than limit bytes
// always leaves the offset past limit, which is how overflow is seen.
func outputCap(limit int64) int64 {
	page := int64(os.Getpagesize())
	return (limit + page) / page * page
}

// outputFiles returns an output file for each stream that needs one (nil
// for the others).
func outputFiles(needOut, needErr bool, outLimit, errLimit int64) (stdout, stderr *os.File, err error) {
	if needOut {
		if stdout, err = outputFile(outLimit); err != nil {
			return nil, nil, err
		}
	}
	if needErr {
		if stderr, err = outputFile(errLimit); err != nil {
			if stdout != nil {
				stdout.Close()
			}
			return nil, nil, err
		}
	}
	return stdout, stderr, nil
}

// written returns how many bytes the child wrote to f (at most its cap):
// the file offset it shares with the child's descriptor (the
// same open file description, dup2(2)). It is 0 when f is nil (a
// caller-supplied file: neither read nor watched) or cannot be read.
func written(f *os.File) int64 {
	if f == nil {
		return 0
	}
	off, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_CUR)
	if err != nil {
		return 0
	}
	return off
}
