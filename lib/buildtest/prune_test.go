package buildtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
)

// TestPrune: entries unused for longer than MaxAge go with their lock
// files; a fresh entry, an old one whose lock is held, a fresh lock file
// alone (a build about to start) and anything not named like a key stay.
func TestPrune(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	root := t.TempDir()
	now := time.Now()
	old := now.Add(-2 * time.Hour)
	key := func(c byte) string {
		b := make([]byte, 32)
		for i := range b {
			b[i] = c
		}
		return string(b)
	}
	// entry makes a key's directory with a binary and its lock file, last
	// used at used.
	entry := func(k string, used time.Time) {
		write(t, filepath.Join(root, k, "bin"), "x")
		write(t, filepath.Join(root, k+lockSuffix), "")
		is.NoErr(os.Chtimes(filepath.Join(root, k), used, used))
		is.NoErr(os.Chtimes(filepath.Join(root, k+lockSuffix), old, old))
	}
	entry(key('a'), old) // unused: removed
	entry(key('b'), now) // fresh: kept
	entry(key('c'), old) // unused but locked: kept
	write(t, filepath.Join(root, key('d')+lockSuffix), "")
	is.NoErr(os.Chtimes(filepath.Join(root, key('d')+lockSuffix), old, old)) // a lock alone, old: removed
	write(t, filepath.Join(root, key('e')+lockSuffix), "")                   // a lock alone, fresh: kept
	write(t, filepath.Join(root, "not-a-key", "bin"), "x")
	is.NoErr(os.Chtimes(filepath.Join(root, "not-a-key"), old, old)) // not ours: kept

	release, err := lock(context.Background(), filepath.Join(root, key('c')+lockSuffix), nil)
	is.NoErr(err)
	(&Cache{MaxAge: time.Hour}).prune(root, now)
	release()

	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(root, name))
		return err == nil
	}
	tests := []struct {
		name string
		want bool
	}{
		{key('a'), false}, {key('a') + lockSuffix, false},
		{key('b'), true}, {key('b') + lockSuffix, true},
		{key('c'), true}, {key('c') + lockSuffix, true},
		{key('d') + lockSuffix, false},
		{key('e') + lockSuffix, true},
		{"not-a-key", true},
	}
	for _, tt := range tests {
		if exists(tt.name) != tt.want {
			t.Errorf("%s: exists %v, want %v", tt.name, !tt.want, tt.want)
		}
	}

	// A negative MaxAge keeps everything.
	(&Cache{MaxAge: -1}).prune(root, now.Add(1000*time.Hour))
	is.True(exists(key('b')))
}

// TestLockAfterRemoval: a caller that opened a lock file which prune
// then removed does not keep a lock on the removed file: it locks the
// file now at the path, the one every later caller locks.
func TestLockAfterRemoval(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	path := filepath.Join(t.TempDir(), key32()+lockSuffix)
	f, held, err := tryLock(path)
	is.NoErr(err)
	is.True(f != nil && !held)
	is.NoErr(os.Remove(path)) // as prune does, still holding the lock
	release, err := lock(context.Background(), path, nil)
	is.NoErr(err) // not blocked by the lock on the removed file
	_, held, err = tryLock(path)
	is.NoErr(err)
	is.True(held) // the new file is the one locked
	release()
	f.Close()
}

func key32() string { return "0123456789abcdef0123456789abcdef" }
