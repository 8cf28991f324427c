package buildtest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/wire"
)

// TestLink links within one file system, copies across two (/dev/shm is
// a tmpfs where it exists), keeps the mode and refuses an existing dst.
func TestLink(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	src := filepath.Join(t.TempDir(), "bin")
	content := []byte("#!/bin/sh\necho hi\n")
	is.NoErr(os.WriteFile(src, content, 0o555))
	dsts := []string{filepath.Join(t.TempDir(), "bin")}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "buildtest")
		is.NoErr(err)
		t.Cleanup(func() { os.RemoveAll(shm) })
		dsts = append(dsts, filepath.Join(shm, "bin"))
	}
	for _, dst := range dsts {
		is.NoErr(Link(src, dst))
		b, err := os.ReadFile(dst)
		is.NoErr(err)
		is.True(bytes.Equal(b, content))
		fi, err := os.Stat(dst)
		is.NoErr(err)
		is.Equal(fi.Mode().Perm(), os.FileMode(0o555))
		is.Equal(wire.CodeOf(Link(src, dst)), CodeIO) // dst exists
	}
}
