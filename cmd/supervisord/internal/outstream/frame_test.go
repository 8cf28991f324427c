package outstream

import (
	"bytes"
	"io"
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

// TestDataWriterMatchesAppendDataFrame guards the writev path: output
// over FrameMax goes out as several frames, each byte for byte what
// AppendDataFrame makes.
func TestDataWriterMatchesAppendDataFrame(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	a, b := socketPair(t)
	defer a.Close()
	out := make([]byte, 2*FrameMax+300)
	for i := range out {
		out[i] = byte(i)
	}
	var want []byte
	for rest := out; len(rest) > 0; {
		n := min(len(rest), FrameMax)
		want = AppendDataFrame(want, rest[:n])
		rest = rest[n:]
	}
	got := make(chan []byte)
	go func() {
		all, _ := io.ReadAll(b)
		got <- all
	}()
	var w DataWriter
	is.NoErr(w.Write(a, out[:10])) // a short one first, then three frames
	is.NoErr(w.Write(a, out))
	a.Close()
	is.Equal(<-got, append(AppendDataFrame(nil, out[:10]), want...))
}

// TestIsDataFrame guards the relay's pass-through: only the exact
// canonical layout of a data frame qualifies.
func TestIsDataFrame(t *testing.T) {
	t.Parallel()
	good := func(n int) []byte { return AppendDataFrame(nil, bytes.Repeat([]byte{'x'}, n))[4:] }
	for _, tc := range []struct {
		name string
		p    []byte
		want bool
	}{
		{"bin8", good(1), true},
		{"bin16", good(256), true},
		{"bin32", good(70000), true},
		{"bin16 for a short b (not canonical)", append([]byte{0x82, 0xa1, 'b', 0xc5, 0, 1, 'x'}, dataTrailer...), false},
		{"empty b", append([]byte{0x82, 0xa1, 'b', 0xc4, 0}, dataTrailer...), false},
		{"trailing byte", append(good(3), 0), false},
		{"short", good(3)[:9], false},
		{"other type", append([]byte{0x82, 0xa1, 'b', 0xc4, 1, 'x'}, 0xa1, 't', 0xa4, 'e', 'x', 'i', 't'), false},
		{"three keys", append([]byte{0x83}, good(3)[1:]...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is.New(t).Equal(IsDataFrame(tc.p), tc.want)
		})
	}
}

// FuzzIsDataFrame checks that whatever IsDataFrame accepts, the wire
// decoder accepts as a data frame whose re-encoding is the same bytes,
// and whose b is what DataOf returns.
func FuzzIsDataFrame(f *testing.F) {
	for _, n := range []int{1, 255, 256, 65535, 65536} {
		f.Add(AppendDataFrame(nil, bytes.Repeat([]byte{'y'}, n))[4:])
	}
	f.Add([]byte{0x82, 0xa1, 'b', 0xc5, 0, 1, 'x', 0xa1, 't', 0xa4, 'd', 'a', 't', 'a'})
	f.Fuzz(func(t *testing.T, p []byte) {
		if !IsDataFrame(p) {
			return
		}
		fr, err := wire.DecodeStreamFrame(p)
		if err != nil || fr.T != wire.StreamData {
			t.Fatalf("accepted %x, but the decoder says %v, %+v", p, err, fr)
		}
		if b, _ := DataOf(p); !bytes.Equal(b, fr.B) {
			t.Fatalf("DataOf(%x) = %x, the decoder's b is %x", p, b, fr.B)
		}
		again, err := wire.Marshal(fr)
		if err != nil || !bytes.Equal(again, p) {
			t.Fatalf("accepted %x, re-encoded as %x", p, again)
		}
	})
}
