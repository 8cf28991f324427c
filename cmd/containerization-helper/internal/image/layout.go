package image

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"
	"hostkit.dev/lib/wire"
)

// openFlags are used for every component inside a layout: never follow a
// symlink, never block on a FIFO, never leak the descriptor to a child.
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

// layoutDir is an open OCI image layout directory. Every read is relative
// to its descriptor with O_NOFOLLOW, so nothing outside the layout is ever
// opened through it.
type layoutDir struct {
	f *os.File
	r *Reader // who it is read for; nil = the helper itself
}

// openLayout opens dir (an absolute or relative path; its last component
// must not be a symlink). Errors: CodeNotFound, CodeBlobUnsafe.
func openLayout(dir string) (*layoutDir, error) {
	fd, err := unix.Open(filepath.Clean(dir), openFlags|unix.O_DIRECTORY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, wire.Wrap(CodeNotFound, "the image layout directory does not exist", err)
		}
		return nil, wire.Wrap(CodeBlobUnsafe, "the image layout is not a directory (or is a symlink)", err)
	}
	return &layoutDir{f: os.NewFile(uintptr(fd), dir)}, nil
}

// Close releases the directory.
func (l *layoutDir) Close() error { return l.f.Close() }

// openAt opens name relative to dirfd as a regular file or, with dir set, a
// directory, never following a symlink. missing is the code for ENOENT.
func openAt(dirfd int, name string, dir bool, missing string) (*os.File, error) {
	flags := openFlags
	if dir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat(dirfd, name, flags, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, wire.Wrap(missing, name+" is missing from the image layout", err)
	case err != nil:
		// ELOOP (a symlink under O_NOFOLLOW), ENOTDIR, EACCES and the like.
		return nil, wire.Wrap(CodeBlobUnsafe, name+" in the image layout is a symlink or not the expected kind of file", err)
	}
	f := os.NewFile(uintptr(fd), name)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, wire.Wrap(CodeBlobUnsafe, "cannot stat "+name, err)
	}
	want := uint32(unix.S_IFREG)
	if dir {
		want = unix.S_IFDIR
	}
	if uint32(st.Mode)&unix.S_IFMT != want {
		f.Close()
		return nil, wire.Errorf(CodeBlobUnsafe, "%s in the image layout is not the expected kind of file", name)
	}
	return f, nil
}

// readSmall reads the top-level file name (oci-layout, index.json) of at
// most limit bytes. Errors: CodeNotFound, CodeBlobUnsafe, CodeTooLarge.
func (l *layoutDir) readSmall(name string, limit int64) ([]byte, error) {
	f, err := l.open(int(l.f.Fd()), name, false, CodeNotFound)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, wire.Wrap(CodeBlobUnsafe, "cannot read "+name, err)
	}
	if int64(len(b)) > limit {
		return nil, wire.Errorf(CodeTooLarge, "%s is larger than %d bytes", name, limit)
	}
	return b, nil
}

// openBlob opens blobs/<alg>/<hex> for d, which checkDigest accepted.
// Errors: CodeBlobMissing, CodeBlobUnsafe.
func (l *layoutDir) openBlob(d digest.Digest) (*os.File, error) {
	blobs, err := l.open(int(l.f.Fd()), "blobs", true, CodeBlobMissing)
	if err != nil {
		return nil, err
	}
	defer blobs.Close()
	alg, err := l.open(int(blobs.Fd()), d.Algorithm().String(), true, CodeBlobMissing)
	if err != nil {
		return nil, err
	}
	defer alg.Close()
	return l.open(int(alg.Fd()), d.Encoded(), false, CodeBlobMissing)
}

// open is openAt inside the layout, checked for l's reader (Reader): for
// a non-root reader a missing name and one it may not access give the
// same error (missingErr).
func (l *layoutDir) open(dirfd int, name string, dir bool, missing string) (*os.File, error) {
	f, err := openAt(dirfd, name, dir, missing)
	if err != nil {
		if l.r != nil && errors.Is(err, unix.ENOENT) {
			return nil, missingErr(name, missing, true, err)
		}
		return nil, err
	}
	return l.checkOpened(f, name, dir, missing)
}

// checkDigest accepts only a well-formed sha256 digest, whose encoded part
// (64 lowercase hex) is then a safe file name; what names it in messages.
// Errors: CodeInvalid, CodeUnsupported.
func checkDigest(d digest.Digest, what string) error {
	// Validate first: Algorithm panics on a string without ':'.
	switch err := d.Validate(); {
	case errors.Is(err, digest.ErrDigestUnsupported):
		return wire.Wrap(CodeUnsupported, what+": only sha256 digests are supported", err)
	case err != nil:
		return wire.Wrap(CodeInvalid, what+": the digest is malformed", err)
	case d.Algorithm() != digest.SHA256:
		return wire.Errorf(CodeUnsupported, "%s: only sha256 digests are supported", what)
	}
	return nil
}
