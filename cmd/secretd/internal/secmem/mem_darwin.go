package secmem

import "golang.org/x/sys/unix"

// mapAnon maps n bytes (rounded up to pages) of private anonymous memory.
// macOS has no MADV_DONTDUMP; RLIMIT_CORE=0 keeps values out of cores.
func mapAnon(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, roundPage(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

func lockMem(b []byte) error { return unix.Mlock(b) }
func unmap(b []byte) error   { return unix.Munmap(b) }

func roundPage(n int) int {
	p := unix.Getpagesize()
	return (n + p - 1) / p * p
}
