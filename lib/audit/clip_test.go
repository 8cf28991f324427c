package audit

import (
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestClip(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.Equal(Clip("short", 8), "short")
	is.Equal(Clip("exactly8", 8), "exactly8")
	is.Equal(Clip(strings.Repeat("M", 300), 256), strings.Repeat("M", 256)+"...(+44 bytes)")
	is.Equal(Clip("aé", 2), "a...(+2 bytes)") // a rune cut in half is dropped, not kept broken
}
