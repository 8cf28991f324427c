package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/pipeline"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

// fakeFrames is a frameSource over decoded payloads: Recv returns each
// payload's frame (or its decode error), then io.EOF (the caller closed
// its connection).
type fakeFrames struct {
	payloads [][]byte
	conn     deadlineConn
}

func (s *fakeFrames) Recv() (*wire.StreamFrame, error) {
	if len(s.payloads) == 0 {
		return nil, io.EOF
	}
	p := s.payloads[0]
	s.payloads = s.payloads[1:]
	return wire.DecodeStreamFrame(p)
}

func (s *fakeFrames) Conn() net.Conn { return &s.conn }

// deadlineConn is a net.Conn of which frameBody uses only
// SetReadDeadline.
type deadlineConn struct{ net.Conn }

func (deadlineConn) SetReadDeadline(time.Time) error { return nil }

// causes records what a frameBody ended its exchange with.
type causes struct {
	mu  sync.Mutex
	all []error
}

func (c *causes) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, err)
}

// splitPayloads cuts data into payloads, each prefixed by its length in
// one byte (a short last one is cut at the end).
func splitPayloads(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		n := min(int(data[0]), len(data)-1)
		out = append(out, data[1:1+n])
		data = data[1+n:]
	}
	return out
}

// bodyCodes are the codes a body's reader may fail with.
var bodyCodes = []string{wire.CodeRequestInvalid, egressdapi.CodeClientClosed, egressdapi.CodeTimeout,
	wire.CodeFrameMalformed, wire.CodeRequestUnknownField, wire.CodeFrameTooLarge, wire.CodeFrameTruncated}

// readAll runs a frameBody over payloads and reads its body whole.
func readAll(payloads [][]byte) (body []byte, cs *causes, err error) {
	cs = &causes{}
	fb := newFrameBody(&fakeFrames{payloads: payloads}, time.Minute, func(err error) { cs.cancel(err) })
	go fb.run()
	body, err = io.ReadAll(fb.Body())
	<-fb.done // the frames end with the connection closing: run ends by itself
	fb.stop()
	return body, cs, err
}

// FuzzFrameBody: whatever frames a caller sends, the body reads as the
// data frames' bytes up to the first eof when every frame before it is a
// data frame of 1 to StreamDataMax bytes, and otherwise fails with a
// typed code; the reader goroutine always ends.
func FuzzFrameBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		payloads := splitPayloads(data)
		body, _, err := readAll(payloads)
		var want []byte
		valid := false
		for _, p := range payloads {
			fr, derr := wire.DecodeStreamFrame(p)
			if derr != nil {
				break
			}
			if fr.T == wire.StreamEOF {
				valid = true
				break
			}
			if fr.T != wire.StreamData || len(fr.B) == 0 || len(fr.B) > egressdapi.StreamDataMax {
				break
			}
			want = append(want, fr.B...)
		}
		if valid {
			if err != nil || !bytes.Equal(body, want) {
				t.Fatalf("a valid body read as %q, %v; want %q", body, err, want)
			}
			return
		}
		if err == nil || !slices.Contains(bodyCodes, wire.CodeOf(err)) {
			t.Fatalf("an invalid body ended with %v (code %q)", err, wire.CodeOf(err))
		}
		if !bytes.HasPrefix(want, body) {
			t.Fatalf("the body read %q is not a prefix of the data sent %q", body, want)
		}
	})
}

func frame(t *testing.T, f *wire.StreamFrame) []byte {
	t.Helper()
	b, err := wire.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFrameBody: the frames of a body, from both sides: data frames then
// eof read as the body; after eof, detach ends the exchange as the
// client leaving; anything out of place is request.invalid, and ends the
// exchange with that code.
func TestFrameBody(t *testing.T) {
	t.Parallel()
	data := func(s string) *wire.StreamFrame { return &wire.StreamFrame{T: wire.StreamData, B: []byte(s)} }
	eof := &wire.StreamFrame{T: wire.StreamEOF}
	detach := &wire.StreamFrame{T: wire.StreamDetach}
	for _, tc := range []struct {
		name   string
		frames []*wire.StreamFrame
		body   string
		code   string // the body's error ("": read to eof)
		gone   bool   // the exchange was ended as the client leaving
	}{
		{"body then eof", []*wire.StreamFrame{data("ab"), data("c"), eof}, "abc", "", true},
		{"empty body", []*wire.StreamFrame{eof}, "", "", true},
		{"eof then detach", []*wire.StreamFrame{data("a"), eof, detach}, "a", "", true},
		{"detach mid-body", []*wire.StreamFrame{data("a"), detach}, "a", egressdapi.CodeClientClosed, true},
		{"closed mid-body", []*wire.StreamFrame{data("a")}, "a", egressdapi.CodeClientClosed, true},
		{"empty data frame", []*wire.StreamFrame{data("a"), data("")}, "a", wire.CodeRequestInvalid, true},
		{"oversized data frame", []*wire.StreamFrame{data(string(make([]byte, egressdapi.StreamDataMax+1)))}, "", wire.CodeRequestInvalid, true},
		{"resize frame", []*wire.StreamFrame{{T: wire.StreamResize, Rows: 1}}, "", wire.CodeRequestInvalid, true},
		{"trailers frame", []*wire.StreamFrame{data("a"), {T: wire.StreamTrailers}}, "a", wire.CodeRequestInvalid, true},
		{"data after eof", []*wire.StreamFrame{eof, data("a")}, "", "", true},
		{"second eof", []*wire.StreamFrame{eof, eof}, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			var payloads [][]byte
			for _, fr := range tc.frames {
				payloads = append(payloads, frame(t, fr))
			}
			body, cs, err := readAll(payloads)
			is.Equal(string(body), tc.body)
			if tc.code == "" {
				is.NoErr(err)
			} else {
				is.Equal(wire.CodeOf(err), tc.code)
			}
			cs.mu.Lock()
			defer cs.mu.Unlock()
			is.Equal(len(cs.all) > 0, tc.gone)
			for _, c := range cs.all {
				is.True(errors.Is(c, pipeline.ErrClientGone))
			}
		})
	}
	t.Run("stop ends a waiting reader", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		a, b := net.Pipe()
		defer b.Close()
		src := &connFrames{c: a}
		fb := newFrameBody(src, time.Minute, func(error) {})
		go fb.run()
		done := make(chan struct{})
		go func() { fb.stop(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("stop did not end the reader")
		}
		_, err := fb.Body().Read(make([]byte, 1))
		is.Equal(wire.CodeOf(err), egressdapi.CodeClientClosed)
	})
}

// connFrames is a frameSource whose Recv waits on a connection that
// never sends (its read deadline wakes it).
type connFrames struct{ c net.Conn }

func (s *connFrames) Recv() (*wire.StreamFrame, error) {
	_, err := s.c.Read(make([]byte, 1))
	return nil, err
}

func (s *connFrames) Conn() net.Conn { return s.c }
