package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"

	"github.com/matryer/is"
)

// socketPair returns the two ends of a connected AF_UNIX stream socket pair
// (socketpair(2), unix(7)) as net.Conns.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	is := is.New(t)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	is.NoErr(err)
	conn := func(fd int, name string) net.Conn {
		f := os.NewFile(uintptr(fd), name)
		defer f.Close() // FileConn dups the descriptor
		c, err := net.FileConn(f)
		is.NoErr(err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	return conn(fds[0], "pair-a"), conn(fds[1], "pair-b")
}

func pipePair(t *testing.T) (net.Conn, net.Conn) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestFrameRoundTrip(t *testing.T) {
	t.Parallel()
	payloads := [][]byte{
		{0x80},
		bytes.Repeat([]byte{'a'}, 100),
		bytes.Repeat([]byte{'b'}, 64<<10+1), // larger than a socket buffer write
		bytes.Repeat([]byte{'c'}, 1<<20),
		AppendStr(nil, "last"),
	}
	for _, tc := range []struct {
		name string
		pair func(*testing.T) (net.Conn, net.Conn)
	}{
		{name: "net.Pipe", pair: pipePair},
		{name: "unix socketpair", pair: socketPair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			w, r := tc.pair(t)
			errc := make(chan error, 1)
			go func() {
				for _, p := range payloads {
					if err := WriteFrame(w, p, 0); err != nil {
						errc <- err
						return
					}
				}
				errc <- w.Close()
			}()
			for i, want := range payloads {
				got, err := ReadFrame(r, 0)
				is.NoErr(err)
				is.True(bytes.Equal(got, want)) // payload i arrives intact
				_ = i
			}
			_, err := ReadFrame(r, 0)
			is.Equal(err, io.EOF) // the writer closed between frames: clean EOF
			is.NoErr(<-errc)
		})
	}
}

func header(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

func TestReadFrameErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   []byte
		max  int
		code string // "" = accepted
		eof  bool   // want io.EOF itself
	}{
		{name: "one byte", in: append(header(1), 0x01)},
		{name: "exactly custom max", in: append(header(16), make([]byte, 16)...), max: 16},
		{name: "exactly default max header", in: header(DefaultMaxFrame), code: CodeFrameTruncated},
		{name: "length zero", in: header(0), code: CodeFrameEmpty},
		{name: "length zero with bytes after", in: append(header(0), 1, 2, 3), code: CodeFrameEmpty},
		{name: "length 0xFFFFFFFF", in: header(0xFFFFFFFF), code: CodeFrameTooLarge},
		{name: "default max plus one", in: header(DefaultMaxFrame + 1), code: CodeFrameTooLarge},
		{name: "over custom max", in: append(header(17), make([]byte, 17)...), max: 16, code: CodeFrameTooLarge},
		{name: "header 1 of 4 bytes", in: []byte{0}, code: CodeFrameTruncated},
		{name: "header 3 of 4 bytes", in: []byte{0, 0, 1}, code: CodeFrameTruncated},
		{name: "header only", in: header(10), code: CodeFrameTruncated},
		{name: "payload 3 of 10 bytes", in: append(header(10), 1, 2, 3), code: CodeFrameTruncated},
		{name: "payload 9 of 10 bytes", in: append(header(10), make([]byte, 9)...), code: CodeFrameTruncated},
		{name: "clean EOF", in: nil, eof: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, err := ReadFrame(bytes.NewReader(tc.in), tc.max)
			switch {
			case tc.eof:
				is.Equal(err, io.EOF) // io.EOF itself, not wrapped
			case tc.code == "":
				is.NoErr(err)
				is.Equal(got, tc.in[4:])
			default:
				is.True(err != nil)
				is.Equal(CodeOf(err), tc.code)
				is.True(got == nil)
				is.True(!errors.Is(err, io.EOF)) // only a clean end is io.EOF
				if tc.code == CodeFrameTruncated {
					is.True(errors.Is(err, io.ErrUnexpectedEOF))
				}
			}
		})
	}
}

func TestReadFrameOtherErrorsPassThrough(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	boom := errors.New("boom")
	_, err := ReadFrame(io.MultiReader(bytes.NewReader([]byte{0, 0}), errReader{boom}), 0)
	is.True(errors.Is(err, boom)) // a read error is returned as it is
	is.Equal(CodeOf(err), CodeInternal)
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestWriteFrameRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		payload []byte
		max     int
		code    string
	}{
		{name: "empty", payload: nil, code: CodeFrameEmpty},
		{name: "over custom max", payload: make([]byte, 17), max: 16, code: CodeFrameTooLarge},
		{name: "over default max", payload: make([]byte, DefaultMaxFrame+1), code: CodeFrameTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			var buf bytes.Buffer
			err := WriteFrame(&buf, tc.payload, tc.max)
			is.Equal(CodeOf(err), tc.code)
			is.Equal(buf.Len(), 0) // nothing written
		})
	}
}

func TestAppendFrameLayout(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.Equal(AppendFrame([]byte{0xaa}, []byte{1, 2, 3}), []byte{0xaa, 0, 0, 0, 3, 1, 2, 3})
}

// TestReadFrameHugeLengthNoAllocation checks that a hostile length header is
// refused before the payload buffer is allocated. It is not parallel: it
// reads process-wide allocation counters.
func TestReadFrameHugeLengthNoAllocation(t *testing.T) {
	is := is.New(t)
	for _, tc := range []struct {
		name string
		n    uint32
		max  int
	}{
		{name: "0xFFFFFFFF, default max", n: 0xFFFFFFFF},
		{name: "default max plus one", n: DefaultMaxFrame + 1},
		{name: "1 MiB over a 1 KiB max", n: 1 << 20, max: 1 << 10},
	} {
		in := header(tc.n)
		rd := bytes.NewReader(in)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		const runs = 100
		for range runs {
			rd.Reset(in)
			_, err := ReadFrame(rd, tc.max)
			is.Equal(CodeOf(err), CodeFrameTooLarge)
		}
		runtime.ReadMemStats(&after)
		perRun := (after.TotalAlloc - before.TotalAlloc) / runs
		t.Logf("%s: %d bytes allocated per refused frame", tc.name, perRun)
		is.True(perRun < 64<<10) // only the error value, never the payload
	}
}
