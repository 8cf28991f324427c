package buildtest

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/matryer/is"
)

func TestCodesSortedUnique(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(Codes))
	is.Equal(len(slices.Compact(slices.Clone(Codes))), len(Codes))
}

// Every code is listed in docs/protocol.md: codes are API.
func TestCodesDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes {
		if !bytes.Contains(doc, []byte("`"+c+"`")) {
			t.Errorf("docs/protocol.md does not list %s", c)
		}
	}
}
