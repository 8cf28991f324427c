package holder

import (
	"bytes"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

func TestAppendDataFrameMatchesWire(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		n    int
	}{
		{"one byte", 1}, {"bin8 max", 255}, {"bin16 min", 256}, {"one PTY read", 4096},
		{"bin16 max", 65535}, {"bin32 min", 65536}, {"coalesced frame", 256 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			b := bytes.Repeat([]byte{'x'}, tc.n)
			b[0], b[tc.n-1] = 0, 0xff
			payload, err := wire.Marshal(&wire.StreamFrame{T: wire.StreamData, B: b})
			is.NoErr(err)
			got := AppendDataFrame([]byte("prefix"), b)
			is.Equal(got[len("prefix"):], wire.AppendFrame(nil, payload)) // same bytes as wire.Marshal
			f, err := wire.DecodeStreamFrame(got[len("prefix")+4:])
			is.NoErr(err)
			is.Equal(f.T, wire.StreamData)
			is.True(bytes.Equal(f.B, b))
		})
	}
}
