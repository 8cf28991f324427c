package image

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/opencontainers/go-digest"
	"hostkit.dev/cmd/containerization-helper/internal/image/imagetest"
	"hostkit.dev/lib/wire"
)

// fixture is a built image layout that subtests copy (building takes
// about 0.3 s; copying a few milliseconds).
type fixture struct {
	layout   string
	manifest digest.Digest
}

// newFixture builds the default fixture image once for a test.
func newFixture(t *testing.T) fixture {
	t.Helper()
	l, d := imagetest.Build(t, t.TempDir())
	return fixture{layout: l, manifest: d}
}

// clone copies the fixture's layout into a fresh directory and returns
// the copy's path.
func (f fixture) clone(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "layout")
	copyTree(t, f.layout, dst)
	return dst
}

// copyTree copies regular files and directories (the only kinds in a
// fixture layout).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if fi.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		o, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(o, in); err != nil {
			o.Close()
			return err
		}
		return o.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// isCode asserts err carries code (and is a *wire.Error).
func isCode(t *testing.T, err error, code string) {
	t.Helper()
	if wire.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
}

// TestCodes: sorted, unique, prefixed and documented (codes are API).
func TestCodes(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(Codes))
	is.Equal(len(slices.Compact(slices.Clone(Codes))), len(Codes))
	doc, err := os.ReadFile("../../../../docs/protocol.md")
	is.NoErr(err)
	for _, c := range Codes {
		is.True(strings.HasPrefix(c, "image."))
		if !strings.Contains(string(doc), "`"+c+"`") {
			t.Errorf("docs/protocol.md does not list %s", c)
		}
	}
}
