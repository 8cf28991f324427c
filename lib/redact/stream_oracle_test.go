package redact

import (
	"bytes"
	"errors"
	"fmt"
)

// streamPieces runs text, cut at the given offsets (ascending), through
// a Stream of s and returns what it handed out and its error.
func streamPieces(s *Scrubber, text []byte, cuts []int) ([]byte, error) {
	st := s.NewStream()
	var out []byte
	var err error
	last := 0
	for _, c := range append(cuts, len(text)) {
		if out, err = st.Next(out, text[last:c]); err != nil {
			return out, err
		}
		last = c
	}
	return st.Close(out)
}

// streamOracle is the buffered answer for one text: ScrubBytes of it and
// whether ContainsDecoded finds an echo in that; on an echo, how much of
// it a Stream hands out with ErrEcho (cut), the same for every cutting.
type streamOracle struct {
	s          *Scrubber
	text, want []byte
	echo       bool
	cut        int
	cutErr     error
}

func newStreamOracle(s *Scrubber, text []byte) *streamOracle {
	want := s.ScrubBytes(text)
	o := &streamOracle{s: s, text: text, want: want, echo: s.ContainsDecoded(want)}
	if o.echo {
		o.cut, o.cutErr = echoCut(s, text, want)
	} else {
		o.want = s.ScrubBody(text)
	}
	return o
}

// echoCut returns how much of want (ScrubBytes of text, which holds an
// echo) a Stream hands out with ErrEcho when it reads text in one piece,
// after checking it against the buffered reference. With e the least
// length for which ContainsDecoded(want[:e]) holds (the first echo is
// whole once e bytes are read), the Stream must hand out want[:k] where
//
//   - want[:e][k:] still holds that echo whole (holdsMatch): no byte of
//     the first match is handed out, whatever comes after it;
//   - k ≥ e - MaxDecodedSpan(longest pattern): what comes before the
//     echo is handed out with the error, but for the bytes a match of
//     some form could still include (at most the span a Stream holds).
//
// In the usual case (one echo, nothing else pending) k is exactly where
// the echo's match begins in want, read back through the views' source
// offsets (TestStreamEchoPrefix pins such cases). Every cutting must
// give the same k: where the Stream stops depends only on the text up to
// the byte that completes the echo.
func echoCut(s *Scrubber, text, want []byte) (int, error) {
	got, err := streamPieces(s, text, nil)
	if !errors.Is(err, ErrEcho) {
		return 0, fmt.Errorf("one piece: got %q, %v; want ErrEcho (scrubbed %q)", got, err, want)
	}
	if !bytes.HasPrefix(want, got) {
		return 0, fmt.Errorf("one piece: got %q, not a prefix of %q", got, want)
	}
	e := 1
	for e < len(want) && !s.ContainsDecoded(want[:e]) {
		e++
	}
	k := len(got)
	if !holdsMatch(s, want[:e], k, s.ContainsDecoded) {
		return 0, fmt.Errorf("one piece: handed out %d bytes, into the echo that ends at %d: %q", k, e, want)
	}
	full, _ := s.load().automata()
	if lo := e - MaxDecodedSpan(full.maxLen); k < lo {
		return 0, fmt.Errorf("one piece: handed out %d bytes, want at least %d before the echo that ends at %d: %q", k, lo, e, want)
	}
	return k, nil
}

// checkStream checks the Stream of s against the buffered oracle on text
// cut at cuts (newStreamOracle(s, text).check(cuts)).
func checkStream(s *Scrubber, text []byte, cuts []int) error {
	return newStreamOracle(s, text).check(cuts)
}

// check runs the text cut at cuts through a Stream: the output is
// ScrubBytes(text) exactly when ContainsDecoded finds nothing in it;
// otherwise ErrEcho with the same prefix of it as echoCut's, which ends
// before the echo begins.
func (o *streamOracle) check(cuts []int) error {
	s, want := o.s, o.want
	got, err := streamPieces(s, o.text, cuts)
	if !o.echo {
		if err != nil || !bytes.Equal(got, want) {
			return fmt.Errorf("cuts %v: got %q, %v; want %q", cuts, got, err, want)
		}
		return nil
	}
	if o.cutErr != nil {
		return o.cutErr
	}
	if !errors.Is(err, ErrEcho) {
		return fmt.Errorf("cuts %v: got %q, %v; want ErrEcho (scrubbed %q)", cuts, got, err, want)
	}
	if !bytes.Equal(got, want[:o.cut]) {
		return fmt.Errorf("cuts %v: got %q with ErrEcho, want %q (in one piece)", cuts, got, want[:o.cut])
	}
	return nil
}

// holdsMatch reports whether text[n:] still holds a match (has), read
// with the run of line breaks that text[:n] ends with, if any: a match
// may begin inside a run that is kept (longer than MaxLineBreak), and
// the bytes of the run before it, handed out, decide that it is kept.
func holdsMatch(s *Scrubber, text []byte, n int, has func([]byte) bool) bool {
	if has(text[n:]) {
		return true
	}
	k := n
	for k > 0 && newline[text[k-1]] {
		k--
	}
	return k < n && has(text[k:])
}

// checkDetector checks a Detector of s on text cut at cuts against
// Contains || ContainsDecoded on the whole text.
func checkDetector(s *Scrubber, text []byte, cuts []int) error {
	want := s.Contains(text) || s.ContainsDecoded(text)
	d := s.NewDetector()
	last := 0
	var rel int
	hit := false
	for _, c := range append(cuts, len(text)) {
		r, h := d.Next(text[last:c])
		if r < rel || r > c {
			return fmt.Errorf("cuts %v: release went from %d to %d after %d bytes", cuts, rel, r, c)
		}
		rel, last = r, c
		if h {
			hit = true
			break
		}
	}
	if !hit {
		r, h := d.Close()
		hit = h
		if !h && r != len(text) {
			return fmt.Errorf("cuts %v: Close released %d of %d", cuts, r, len(text))
		}
	}
	if hit != want {
		return fmt.Errorf("cuts %v: hit %v, want %v in %q", cuts, hit, want, text)
	}
	if hit && !holdsMatch(s, text, rel, func(b []byte) bool { return s.Contains(b) || s.ContainsDecoded(b) }) {
		return fmt.Errorf("cuts %v: released %d bytes, into the match: %q", cuts, rel, text)
	}
	return nil
}
