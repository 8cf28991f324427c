package procexec

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// The working directory is pinned when it is opened: swapping it for a
// symlink afterwards is not followed, and a symlink when opening is refused.
func TestWorkDirPinned(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r, _ := newTestRunner(t, nil)
	base := t.TempDir()
	orig, other := filepath.Join(base, "work"), filepath.Join(base, "other")
	is.NoErr(os.Mkdir(orig, 0o700))
	is.NoErr(os.Mkdir(other, 0o700))
	is.NoErr(os.WriteFile(filepath.Join(orig, "where"), []byte("pinned"), 0o600))
	is.NoErr(os.WriteFile(filepath.Join(other, "where"), []byte("swapped"), 0o600))

	wd, err := OpenWorkDir(orig)
	is.NoErr(err)
	defer wd.Close()
	is.Equal(wd.Path(), orig)

	// Swap: the pinned directory moves away and a symlink takes its place.
	moved := filepath.Join(base, "moved")
	is.NoErr(os.Rename(orig, moved))
	is.NoErr(os.Symlink(other, orig))

	spec := sh(`cat where; echo; pwd -P`)
	spec.Dir = wd
	res, err := r.Run(context.Background(), spec)
	is.NoErr(err)
	is.Equal(string(res.Stdout), "pinned\n"+moved+"\n")

	// Opening through the symlink now is refused.
	_, err = OpenWorkDir(orig)
	is.Equal(wire.CodeOf(err), CodeWorkDirInvalid)
}

func TestOpenWorkDirRefuses(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.MkdirAll(filepath.Join(real, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		code string
	}{
		{"plain", filepath.Join(real, "sub"), ""},
		{"root", "/", ""},
		{"relative", "real", CodeWorkDirInvalid},
		{"final symlink", filepath.Join(base, "link"), CodeWorkDirInvalid},
		{"symlink in the middle", filepath.Join(base, "link", "sub"), CodeWorkDirInvalid},
		{"missing", filepath.Join(base, "missing"), CodeWorkDirInvalid},
		{"a file", filepath.Join(base, "file"), CodeWorkDirInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			wd, err := OpenWorkDir(tt.path)
			is.Equal(wire.CodeOf(err), tt.code)
			if err == nil {
				is.NoErr(wd.Close())
				is.NoErr(wd.Close()) // idempotent
			}
		})
	}
}

// A pinned directory that was removed is refused before anything runs.
func TestWorkDirRemoved(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	r, _ := newTestRunner(t, nil)
	dir := filepath.Join(t.TempDir(), "gone")
	is.NoErr(os.Mkdir(dir, 0o700))
	wd, err := OpenWorkDir(dir)
	is.NoErr(err)
	defer wd.Close()
	is.NoErr(os.Remove(dir))
	marker := filepath.Join(t.TempDir(), "ran")
	spec := sh(`: > "$1"`, marker)
	spec.Dir = wd
	res, err := r.Run(context.Background(), spec)
	is.Equal(wire.CodeOf(err), CodeWorkDirInvalid)
	is.True(res == nil)
	is.True(!exists(marker))
}
