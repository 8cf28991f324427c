package daemon

import (
	"regexp"
	"testing"

	"github.com/matryer/is"
)

var epochRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

func TestNewEpoch(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	seen := map[string]bool{}
	for range 64 {
		e, err := NewEpoch()
		is.NoErr(err)
		is.True(epochRE.MatchString(e)) // 16 lowercase hex
		is.True(!seen[e])               // differs between calls
		seen[e] = true
	}
}
