package holder

import (
	"testing"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

func TestSignalRequestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		signal int64
		code   string // "" = valid
	}{
		{name: "SIGHUP", signal: 1},
		{name: "last realtime signal", signal: 64},
		{name: "zero", signal: 0, code: api.CodeSignalInvalid},
		{name: "negative", signal: -9, code: api.CodeSignalInvalid},
		{name: "past 64", signal: 65, code: api.CodeSignalInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(wire.CodeOf((&SignalRequest{Signal: tc.signal}).Validate()), tc.code)
		})
	}
}
