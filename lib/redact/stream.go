package redact

import (
	"bytes"
	"errors"
	"unsafe"
)

// ErrEcho is returned by Stream.Next and Stream.Close when the scrubbed
// text holds a registered value in a form that cannot be replaced in
// place (one that ContainsDecoded finds). The stream has then forwarded
// nothing of the echo: everything it handed out, including the text
// returned with ErrEcho, ends before the echo's first byte. The caller
// forwards that text and aborts the body.
var ErrEcho = errors.New("redact: the text echoes a held value in a form that cannot be replaced")

// ErrStreamClosed is returned by Stream.Next and Stream.Close after
// Close.
var ErrStreamClosed = errors.New("redact: stream closed")

// Stream scrubs one body that arrives in pieces, such as an upstream
// answer forwarded as it arrives (server-sent events). It matches the
// values registered when it was made. It is not safe for concurrent use.
//
// What it hands out, piece by piece, is exactly ScrubBytes of the whole
// body, unless ContainsDecoded of that result is true: then it returns
// ErrEcho with the text up to the first byte of the echo's match (as the
// views map it back to the text), less any of it still held when the
// match was found; it never hands out a byte of the echo. It holds back
// only text that may still be part of a match: the longest suffix that
// is a proper prefix of some form of some value (an exact form, or a
// form ContainsDecoded reads in one of its views), an escape or a run of
// line breaks or invisible characters not yet ended, and a match waiting
// for a longer one at the same position. So a piece whose end cannot
// begin a held value goes out whole at once, and a proper prefix of a
// held value in any form never goes out before the stream knows what
// follows it. Held reports the text held: at most MaxSpan of the
// longest value where the text has no escapes, and MaxDecodedSpan of it
// at worst (a partial match in text escaped four times over). Beyond
// that a Stream keeps, per view, rings that map a partial match back to
// the text, made when a partial match first needs one and grown only
// while it needs more: a fresh stream, or one whose text has begun no
// form, takes about 7 KiB. The automata are the Scrubber's, built once
// per set of values.
//
// Each byte is read once by each view (the text, the text with escapes
// undone up to MaxDecodeLevels times, each without line breaks and
// with '+' as a space, each without invisible characters), so Next costs
// O(len(p)) amortised whatever the sizes of the pieces. Text in which
// no view can begin a form is not read view by view: a table scan
// passes every byte that begins no form and that no escape or view
// changes, and the common escapes, line breaks and UTF-8 bytes that
// leave every view in its start state, so such text costs a table
// lookup a byte rather than a step of every view (the benchmarks in
// stream_bench_test.go give the rates). What is exact
// and what is conservative: the output and the decision to abort agree
// with ScrubBytes and ContainsDecoded on every split of every text (the
// tests check every split point and random splits); the held text may
// be longer than the least possible, by the bytes of an escape or a
// reference whose decoded bytes could not begin a form anyway, and by
// separated hex that a separator at an odd place has already ruled out.
type Stream struct {
	r      *replacer // nil: nothing registered, bytes pass through
	v      *views
	out    []byte // scrubbed text the views have read and not handed out: the held tail
	base   int64  // offset of out[0] in the scrubbed text
	err    error
	closed bool
}

// NewStream returns a Stream over the values registered now. A nil
// Scrubber, or one with nothing registered, gives a Stream that passes
// bytes through unchanged.
func (s *Scrubber) NewStream() *Stream {
	m := s.load()
	if m == nil {
		return &Stream{}
	}
	return &Stream{r: newReplacer(m), v: newViews(m)}
}

// Next reads p, the next piece of the body, and appends to dst what may
// be forwarded now; p is not kept. With nothing registered it returns p
// itself when dst is empty (no copy). When the body echoes a held value
// it returns ErrEcho and dst with the text before the echo appended:
// every byte before the first byte of the match found first that no
// other match could include (a byte that may begin a form of a held
// value is not handed out). Every later call returns ErrEcho alone.
func (st *Stream) Next(dst, p []byte) ([]byte, error) {
	if st.err != nil {
		return dst, st.err
	}
	if st.closed {
		return dst, ErrStreamClosed
	}
	if st.r == nil {
		if len(dst) == 0 {
			return p, nil
		}
		return append(dst, p...), nil
	}
	if overlaps(dst, p) {
		p = bytes.Clone(p) // dst's bytes are written before p is read
	}
	start := len(dst)
	st.r.out = append(dst, st.out...)
	st.r.run(p, false)
	dst, st.r.out = st.r.out, nil
	return st.forward(dst, start, false)
}

// overlaps reports whether p shares bytes with dst's backing array, up
// to its capacity.
func overlaps(dst, p []byte) bool {
	if cap(dst) == 0 || len(p) == 0 {
		return false
	}
	d := uintptr(unsafe.Pointer(unsafe.SliceData(dst[:cap(dst)])))
	q := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return q < d+uintptr(cap(dst)) && d < q+uintptr(len(p))
}

// Close ends the body and appends to dst the rest of it, or, when the
// end completes an echo, the text before it and ErrEcho. A rest that
// ends with a proper prefix of a form of a held value, MinTailPrefix
// bytes or longer, ends with Redacted instead (ScrubBody).
func (st *Stream) Close(dst []byte) ([]byte, error) {
	if st.err != nil {
		return dst, st.err
	}
	if st.closed {
		return dst, ErrStreamClosed
	}
	st.closed = true
	if st.r == nil {
		return dst, nil
	}
	start := len(dst)
	st.r.out = append(dst, st.out...)
	st.r.run(nil, true)
	dst, st.r.out = st.r.out, nil
	dst, err := st.forward(dst, start, true)
	if err != nil {
		return dst, err
	}
	// The hold-back rule kept the longest suffix that is a proper prefix
	// of a form, so it is all here: at the body's end it is replaced as
	// ScrubBody replaces it.
	if k := st.r.m.tailPrefix(dst[start:]); k > 0 {
		dst = append(dst[:len(dst)-k], Redacted...)
	}
	return dst, nil
}

// Held returns how many bytes of text the stream holds back now: read
// but neither forwarded nor yet known to be safe.
func (st *Stream) Held() int {
	if st.r == nil {
		return 0
	}
	return len(st.out) + st.r.held()
}

// forward gives the views the replacer's final text, which it has
// appended to dst after the held tail (dst[start:] is that tail, then
// the new text), and hands out what no match can need any more: it
// keeps the rest in st.out and returns dst cut after what goes out. At
// the end of the body (all) every transducer lets out what it holds
// first.
func (st *Stream) forward(dst []byte, start int, all bool) ([]byte, error) {
	text := dst[start:]
	old := len(st.out)
	st.v.write(text[old:], st.base+int64(old))
	if all {
		st.v.flush()
	}
	n := len(text)
	switch {
	case st.v.hit:
		// Everything before the echo (and before what was held when
		// it was found) goes out with the error.
		n = int(max(min(int64(n), st.v.at-st.base), 0))
		st.err = ErrEcho
	case !all:
		// What the views hold only moves forward, so n ≥ 0.
		n = int(max(min(int64(n), st.v.held()-st.base), 0))
	}
	if st.err != nil {
		st.out = nil
		return dst[:start+n], st.err
	}
	st.out = append(st.out[:0], text[n:]...)
	st.base += int64(n)
	return dst[:start+n], nil
}
