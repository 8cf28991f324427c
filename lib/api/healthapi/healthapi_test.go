package healthapi

import (
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestSchema(t *testing.T) {
	is := is.New(t)
	is.NoErr(wire.CheckSchema(Response{}))
}
