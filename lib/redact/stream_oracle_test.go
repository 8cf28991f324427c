package redact

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
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

// checkStream checks the Stream of s against the buffered oracle on text
// cut at cuts: the output is ScrubBytes(text) exactly when
// ContainsDecoded finds nothing in it; otherwise ErrEcho, after a prefix
// of it that ends before the echo begins.
func checkStream(s *Scrubber, text []byte, cuts []int) error {
	want := s.ScrubBytes(text)
	echo := s.ContainsDecoded(want)
	got, err := streamPieces(s, text, cuts)
	if !echo {
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
	if s.ContainsDecoded(got) {
		return fmt.Errorf("cuts %v: handed out an echo: %q", cuts, got)
	}
	if end := echoStart(s, want); len(got) > end {
		return fmt.Errorf("cuts %v: handed out %d bytes, past the echo at %d: %q", cuts, len(got), end, want)
	}
	return nil
}

// echoStart returns where the first echo in b to end begins: the
// shortest prefix of b with an echo, then the latest start that keeps it.
func echoStart(s *Scrubber, b []byte) int {
	e := 1
	for e < len(b) && !s.ContainsDecoded(b[:e]) {
		e++
	}
	st := 0
	for st+1 < e && s.ContainsDecoded(b[st+1:e]) {
		st++
	}
	return st
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
	if hit {
		if end := detectStart(s, text); rel > end {
			return fmt.Errorf("cuts %v: released %d bytes, past the match at %d in %q", cuts, rel, end, text)
		}
	}
	return nil
}

func detectStart(s *Scrubber, b []byte) int {
	has := func(x []byte) bool { return s.Contains(x) || s.ContainsDecoded(x) }
	e := 1
	for e < len(b) && !has(b[:e]) {
		e++
	}
	st := 0
	for st+1 < e && has(b[st+1:e]) {
		st++
	}
	return st
}

func TestStreamSmoke(t *testing.T) {
	s := NewScrubber()
	s.Register([]byte("s3cr3tvalue-0123"))
	for _, x := range []string{"hello s3cr3tvalue-0123 world", "a%73%33cr3tvalue-0123", "x 73 33 63 72 33 74 76 61 6c 75 65 2d 30 31 32 33 y", "data: hello\n\n"} {
		for i := 0; i <= len(x); i++ {
			if err := checkStream(s, []byte(x), []int{i}); err != nil {
				t.Fatal(err)
			}
			if err := checkDetector(s, []byte(x), []int{i}); err != nil {
				t.Fatal(err)
			}
		}
	}
}
