package state

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// clock is an injectable time source for expiry tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.UnixMilli(1_900_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// stateDir returns a not yet existing state directory under a fresh temp
// dir.
func stateDir(t *testing.T) string { return filepath.Join(t.TempDir(), "helper") }

// open opens dir with o or fails; the store is closed at cleanup.
func open(t *testing.T, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(dir, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// isCode asserts err carries code.
func isCode(t *testing.T, err error, code string) {
	t.Helper()
	if wire.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
}

const (
	inst1 = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b"
	inst2 = "0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d"
)

// TestCodes: sorted, unique, documented (codes are API).
func TestCodes(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(Codes))
	is.Equal(len(slices.Compact(slices.Clone(Codes))), len(Codes))
	doc, err := os.ReadFile("../../../../docs/protocol.md")
	is.NoErr(err)
	for _, c := range Codes {
		if !strings.Contains(string(doc), "`"+c+"`") {
			t.Errorf("docs/protocol.md does not list %s", c)
		}
	}
}
