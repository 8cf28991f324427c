package imagetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/matryer/is"
)

// Two builds in different directories give the same manifest digest and
// byte-identical layouts: the fixture's digests are stable.
func TestBuildStable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a, da := Build(t, t.TempDir())
	b, db := Build(t, t.TempDir())
	is.Equal(da, db)
	is.Equal(files(t, a), files(t, b))
}

// Options change the digest, and stay stable themselves.
func TestBuildWithOptionsStable(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	o := Options{Cmd: []string{"/bin/echo", "hi"}, Labels: map[string]string{"x": "y"}, PayloadBytes: 4096}
	_, d0 := Build(t, t.TempDir())
	_, d1 := BuildWith(t, t.TempDir(), o)
	_, d2 := BuildWith(t, t.TempDir(), o)
	is.True(d0 != d1)
	is.Equal(d1, d2)
}

// files maps every file under root (relative path) to its content.
func files(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
