package state

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
)

// Writes between two Opens go to state.wal; Open adopts its newest intact
// slot, writes it back as state.json and removes the slots. A torn newest
// slot leaves the one before it (the last acknowledged write), and a slot
// older than state.json is ignored.
func TestWriteAhead(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	dir := stateDir(t)
	s := open(t, dir, Options{})
	snap, err := os.ReadFile(filepath.Join(dir, FileName))
	is.NoErr(err)
	for range 3 {
		_, err := s.AdvanceFence(inst1)
		is.NoErr(err)
	}
	after, err := os.ReadFile(filepath.Join(dir, FileName))
	is.NoErr(err)
	is.Equal(after, snap) // the three writes went to the slots only
	_, err = os.Stat(filepath.Join(dir, walName))
	is.NoErr(err)
	is.NoErr(s.Close())

	// Tear the newest slot (generation 4, slot 0): the one before it
	// (generation 3, fence 2) is what survives.
	torn := filepath.Join(t.TempDir(), "torn")
	copyDir(t, dir, torn)
	f, err := os.OpenFile(filepath.Join(torn, walName), os.O_RDWR, 0)
	is.NoErr(err)
	_, err = f.WriteAt([]byte("garbage"), walHeader+10)
	is.NoErr(err)
	is.NoErr(f.Close())
	st := open(t, torn, Options{})
	n, err := st.Fence(inst1)
	is.NoErr(err)
	is.Equal(n, uint64(2))

	// The intact copy: fence 3, adopted into state.json, slots gone.
	walCopy := mustRead(t, filepath.Join(dir, walName))
	s = open(t, dir, Options{})
	n, err = s.Fence(inst1)
	is.NoErr(err)
	is.Equal(n, uint64(3))
	_, err = os.Stat(filepath.Join(dir, walName))
	is.True(os.IsNotExist(err))
	is.NoErr(s.Close())

	// A stale state.wal (slots no newer than state.json) changes nothing.
	is.NoErr(os.WriteFile(filepath.Join(dir, walName), walCopy, 0o600))
	s = open(t, dir, Options{})
	n, err = s.Fence(inst1)
	is.NoErr(err)
	is.Equal(n, uint64(3))
	_, err = s.AdvanceFence(inst1) // and the slots go on from there
	is.NoErr(err)
	is.NoErr(s.Close())
	s = open(t, dir, Options{})
	n, err = s.Fence(inst1)
	is.NoErr(err)
	is.Equal(n, uint64(4))
	is.NoErr(s.Close())

	// state.wal without state.json is refused, not a new project.
	orphan := stateDir(t)
	is.NoErr(os.MkdirAll(orphan, 0o700))
	is.NoErr(os.WriteFile(filepath.Join(orphan, walName), walCopy, 0o600))
	_, err = Open(orphan, Options{})
	isCode(t, err, CodeCorrupt)
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == lockName || e.IsDir() {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), mustRead(t, filepath.Join(src, e.Name())), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
