package wsframe

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/matryer/is"
)

// TestReadHeader reads frames of every length form and refuses the
// malformed ones (both sides of each rule of RFC 6455 section 5.2).
func TestReadHeader(t *testing.T) {
	t.Parallel()
	mask := []byte{1, 2, 3, 4}
	tests := []struct {
		name string
		in   []byte
		want Header
		err  error
	}{
		{"text, short", []byte{0x81, 0x05}, Header{Fin: true, Opcode: OpText, Length: 5}, nil},
		{"masked binary", append([]byte{0x82, 0x83}, mask...), Header{Fin: true, Opcode: OpBinary, Masked: true, Mask: [4]byte{1, 2, 3, 4}, Length: 3}, nil},
		{"16-bit length", []byte{0x01, 126, 0x01, 0x00}, Header{Opcode: OpText, Length: 256}, nil},
		{"64-bit length", []byte{0x00, 127, 0, 0, 0, 0, 0, 1, 0, 0}, Header{Opcode: OpContinuation, Length: 65536}, nil},
		{"close", []byte{0x88, 0x02}, Header{Fin: true, Opcode: OpClose, Length: 2}, nil},
		{"16-bit length not shortest", []byte{0x81, 126, 0x00, 0x7D}, Header{}, ErrMalformed},
		{"64-bit length not shortest", []byte{0x81, 127, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF}, Header{}, ErrMalformed},
		{"64-bit length top bit", []byte{0x81, 127, 0x80, 0, 0, 0, 0, 0, 0, 0}, Header{}, ErrMalformed},
		{"reserved bit", []byte{0xC1, 0x00}, Header{}, ErrMalformed},
		{"reserved opcode", []byte{0x83, 0x00}, Header{}, ErrMalformed},
		{"fragmented control", []byte{0x09, 0x00}, Header{}, ErrMalformed},
		{"long control", []byte{0x89, 126, 0x00, 0x7E}, Header{}, ErrMalformed},
		{"over the bound", []byte{0x82, 127, 0, 0, 0, 0, 0, 0x20, 0, 0}, Header{}, ErrTooLarge},
		{"cut in the length", []byte{0x81, 126, 0x01}, Header{}, io.ErrUnexpectedEOF},
		{"cut in the mask", []byte{0x81, 0x81, 1, 2}, Header{}, io.ErrUnexpectedEOF},
		{"nothing", nil, Header{}, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			h, err := ReadHeader(bufio.NewReader(bytes.NewReader(tt.in)), 1<<20)
			if tt.err != nil {
				is.True(errors.Is(err, tt.err))
				return
			}
			is.NoErr(err)
			is.Equal(h, tt.want)
		})
	}
}

// TestAppendHeaderRoundTrip: every header AppendHeader writes reads back
// the same, in the shortest length form.
func TestAppendHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for _, n := range []int64{0, 125, 126, 65535, 65536, 1 << 40} {
		for _, masked := range []bool{false, true} {
			h := Header{Fin: true, Opcode: OpBinary, Masked: masked, Length: n}
			if masked {
				h.Mask = [4]byte{9, 8, 7, 6}
			}
			b := AppendHeader(nil, h)
			got, err := ReadHeader(bufio.NewReader(bytes.NewReader(b)), 0)
			is.NoErr(err)
			is.Equal(got, h)
			want := 2
			switch {
			case n > 65535:
				want += 8
			case n > 125:
				want += 2
			}
			if masked {
				want += 4
			}
			is.Equal(len(b), want)
		}
	}
}

// TestMaskAndClose: masking twice restores the payload from any offset;
// a close payload carries its code and a reason cut at a rune boundary
// to fit a control frame.
func TestMaskAndClose(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	key := [4]byte{0xA, 0xB, 0xC, 0xD}
	p := []byte("hello, websocket")
	q := bytes.Clone(p)
	MaskBytes(key, 0, q[:5])
	MaskBytes(key, 5, q[5:])
	is.True(!bytes.Equal(p, q))
	MaskBytes(key, 0, q)
	is.Equal(p, q)
	c := ClosePayload(ClosePolicy, string(bytes.Repeat([]byte("é"), 100)))
	is.True(len(c) <= MaxControlPayload)
	is.Equal(c[:2], []byte{0x03, 0xF0})
	is.True(bytes.HasSuffix(c, []byte("é")))
}

// FuzzReadHeader: any input either fails with a typed error or reads a
// header that AppendHeader writes back byte for byte (the shortest form
// is the only one accepted).
func FuzzReadHeader(f *testing.F) {
	for _, s := range [][]byte{{0x81, 0x05}, {0x82, 0x83, 1, 2, 3, 4}, {0x01, 126, 1, 0}, {0x88, 0x02}, {0xC1, 0}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ReadHeader(bufio.NewReader(bytes.NewReader(b)), 1<<30)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && err != io.EOF && err != io.ErrUnexpectedEOF {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		enc := AppendHeader(nil, h)
		if !bytes.Equal(enc, b[:len(enc)]) {
			t.Fatalf("read %+v from % x, writes % x", h, b, enc)
		}
	})
}
