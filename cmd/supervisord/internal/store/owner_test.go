package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestLoadOwner: the id is made once and read back the same on every
// later load; a damaged file is an error and is left as it is.
func TestLoadOwner(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := t.TempDir()
	id, err := LoadOwner(dir)
	is.NoErr(err)
	is.True(strings.HasPrefix(id, OwnerPrefix))
	is.Equal(len(id), len(OwnerPrefix)+32)
	again, err := LoadOwner(dir)
	is.NoErr(err)
	is.Equal(again, id)
	other, err := LoadOwner(t.TempDir())
	is.NoErr(err)
	is.True(other != id) // random per state directory
	fi, err := os.Stat(filepath.Join(dir, FileOwner))
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600))
	ents, _ := os.ReadDir(dir)
	is.Equal(len(ents), 1) // no temp file left

	for _, bad := range []string{"", "SV-X\n", "sv_x\n", strings.Repeat("a", 65) + "\n"} {
		d := t.TempDir()
		is.NoErr(os.WriteFile(filepath.Join(d, FileOwner), []byte(bad), 0o600))
		_, err := LoadOwner(d)
		is.True(err != nil)
		b, _ := os.ReadFile(filepath.Join(d, FileOwner))
		is.Equal(string(b), bad) // never replaced
	}
}
