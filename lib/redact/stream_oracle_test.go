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
// whether ContainsDecoded finds an echo in that.
type streamOracle struct {
	s          *Scrubber
	text, want []byte
	echo       bool
}

func newStreamOracle(s *Scrubber, text []byte) *streamOracle {
	want := s.ScrubBytes(text)
	return &streamOracle{s: s, text: text, want: want, echo: s.ContainsDecoded(want)}
}

// checkStream checks the Stream of s against the buffered oracle on text
// cut at cuts (newStreamOracle(s, text).check(cuts)).
func checkStream(s *Scrubber, text []byte, cuts []int) error {
	return newStreamOracle(s, text).check(cuts)
}

// check runs the text cut at cuts through a Stream: the output is
// ScrubBytes(text) exactly when ContainsDecoded finds nothing in it;
// otherwise ErrEcho, after a prefix of it that ends before the echo
// begins (what is left still holds the echo whole).
func (o *streamOracle) check(cuts []int) error {
	s, want := o.s, o.want
	got, err := streamPieces(s, o.text, cuts)
	if !o.echo {
		if err != nil || !bytes.Equal(got, want) {
			return fmt.Errorf("cuts %v: got %q, %v; want %q", cuts, got, err, want)
		}
		return nil
	}
	if !errors.Is(err, ErrEcho) {
		return fmt.Errorf("cuts %v: got %q, %v; want ErrEcho (scrubbed %q)", cuts, got, err, want)
	}
	if !bytes.HasPrefix(want, got) {
		return fmt.Errorf("cuts %v: got %q, not a prefix of %q", cuts, got, want)
	}
	if !holdsMatch(s, want, len(got), s.ContainsDecoded) {
		return fmt.Errorf("cuts %v: handed out %d bytes, into the echo: %q", cuts, len(got), want)
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
