package netguard

import (
	"slices"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/wire"
)

func TestCodesSortedUnique(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(Codes))                                // Codes must be sorted
	is.Equal(len(slices.Compact(slices.Clone(Codes))), len(Codes)) // Codes must be unique
	for _, c := range Codes {
		is.True(!slices.Contains(wire.Codes, c)) // no clash with wire codes
	}
}

// codeOf returns err's code, or "" for nil, failing on an untyped error.
func codeOf(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	c := wire.CodeOf(err)
	if !slices.Contains(Codes, c) {
		t.Fatalf("error %v has code %q, not one of netguard.Codes", err, c)
	}
	return c
}
