package redact

import "testing"

// fuzzCuts turns the fuzzer's cut bytes into ascending offsets in [0, n].
func fuzzCuts(n int, cuts []byte) []int {
	var out []int
	at := 0
	for _, c := range cuts {
		at += int(c)
		if at > n {
			break
		}
		out = append(out, at)
	}
	return out
}

// FuzzStream checks the Stream oracle (checkStream) for a fuzzer-chosen
// value, text and cutting: each byte of cuts is the length of a piece.
func FuzzStream(f *testing.F) {
	f.Add([]byte("s3cr3tvalue-0123"), []byte("data: s3cr3tvalue-0123\n\n"), []byte{3, 5, 1})
	f.Fuzz(func(t *testing.T, value, text, cuts []byte) {
		s := NewScrubber()
		s.Register(value)
		s.Register([]byte("D]xyz"))
		if err := checkStream(s, text, fuzzCuts(len(text), cuts)); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzDetector checks the Detector oracle (checkDetector) the same way.
func FuzzDetector(f *testing.F) {
	f.Add([]byte("s3cr3tvalue-0123"), []byte("q=s3cr3tvalue%2D0123"), []byte{3, 5, 1})
	f.Fuzz(func(t *testing.T, value, text, cuts []byte) {
		s := NewScrubber()
		s.Register(value)
		if err := checkDetector(s, text, fuzzCuts(len(text), cuts)); err != nil {
			t.Fatal(err)
		}
	})
}
