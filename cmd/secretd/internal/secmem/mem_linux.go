package secmem

import "golang.org/x/sys/unix"

// mapAnon maps n bytes (rounded up to pages) of private anonymous memory
// and marks it MADV_DONTDUMP, so even a core dump would not contain it.
func mapAnon(n int) ([]byte, error) {
	mem, err := unix.Mmap(-1, 0, roundPage(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(mem, unix.MADV_DONTDUMP)
	return mem, nil
}

func lockMem(b []byte) error { return unix.Mlock(b) }
func unmap(b []byte) error   { return unix.Munmap(b) }

func roundPage(n int) int {
	p := unix.Getpagesize()
	return (n + p - 1) / p * p
}
