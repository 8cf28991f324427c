package rpc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/wire"
)

// FuzzReadFrame checks that the buffered readFrame agrees with
// wire.ReadFrame on every input: same payload, or same error code (io.EOF
// only for a clean end).
func FuzzReadFrame(f *testing.F) {
	for _, seed := range [][]byte{
		nil, {0}, {0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 1, 0x80}, {0, 0, 0, 2, 0x80},
		{0, 0, 0, 1, 0x80, 0, 0, 0, 1, 0x81}, {0xff, 0xff, 0xff, 0xff},
		wire.AppendFrame(nil, wire.AppendRequest(nil, &wire.Request{ID: make([]byte, 16), Op: "health", Deadline: 1})),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 1 << 10
		want := bytes.NewReader(in)
		got := bufio.NewReaderSize(bytes.NewReader(in), 16)
		for {
			wp, werr := wire.ReadFrame(want, max)
			gp, gerr := readFrame(got, max)
			if (werr == nil) != (gerr == nil) || wire.CodeOf(werr) != wire.CodeOf(gerr) {
				t.Fatalf("wire: %v; rpc: %v", werr, gerr)
			}
			if errors.Is(gerr, io.EOF) != (werr == io.EOF) {
				t.Fatalf("clean end differs: wire %v, rpc %v", werr, gerr)
			}
			if werr != nil {
				return
			}
			if !bytes.Equal(wp, gp) {
				t.Fatalf("payload %x, want %x", gp, wp)
			}
		}
	})
}

func TestFinishFrame(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload []byte
		max     int
		code    string
	}{
		{"one byte", []byte{0x80}, 0, ""},
		{"at the limit", make([]byte, 8), 8, ""},
		{"empty", nil, 0, wire.CodeFrameEmpty},
		{"over the limit", make([]byte, 9), 8, wire.CodeFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			b, err := finishFrame(append(beginFrame(nil), tt.payload...), tt.max)
			is.Equal(wire.CodeOf(err), tt.code)
			if tt.code == "" {
				is.Equal(b, wire.AppendFrame(nil, tt.payload))
			}
		})
	}
	is := is.New(t)
	is.Equal(cap(keepBuf(make([]byte, 10, maxKeptBuf+1))), 0)
	is.Equal(cap(keepBuf(make([]byte, 10, 100))), 100)
}
