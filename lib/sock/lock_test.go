package sock

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestLockFileUnsafe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, lock string)
	}{
		{name: "symlink", setup: func(t *testing.T, lock string) {
			target := filepath.Join(filepath.Dir(lock), "elsewhere")
			if err := os.WriteFile(target, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, lock); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "fifo", setup: func(t *testing.T, lock string) {
			if err := syscall.Mkfifo(lock, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "directory", setup: func(t *testing.T, lock string) {
			if err := os.Mkdir(lock, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			path := sockPath(t)
			is.NoErr(EnsureDir(filepath.Dir(path), 0, -1))
			tc.setup(t, path+lockSuffix)
			_, err := Listen(context.Background(), Config{Path: path, Group: -1})
			is.Equal(wire.CodeOf(err), CodeLockUnsafe)
			_, err = os.Lstat(path)
			is.True(os.IsNotExist(err)) // nothing was bound
		})
	}
}
