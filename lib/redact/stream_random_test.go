package redact

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// streamBytes are what random values and noise are made of: the bytes
// that start escapes, references and invisible characters, break lines,
// spell hex and separators, and overlap the marker.
var streamBytes = []string{"a", "b", "c", "d", "e", "f", "0", "1", "9", "x", "Z", "[", "]", "D", "%", "\\", "&",
	"#", ";", "+", "=", "\n", "\r", " ", ":", "-", "\u200b", "é", "u", "R", "E", "A", "C", "T", "/", "\""}

// TestStreamRandomValues: random values made of the bytes every escape
// and view touches, one to three at once, in random texts of their
// forms with those bytes sprinkled in, on every two-piece split and
// byte by byte; the Detector on every third split.
func TestStreamRandomValues(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(string(rune('a'+seed)), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			rng := rand.New(rand.NewPCG(seed, 43))
			pick := func() string { return streamBytes[rng.IntN(len(streamBytes))] }
			for range 60 {
				var vs []string
				for range 1 + rng.IntN(3) {
					var b strings.Builder
					for range 4 + rng.IntN(10) {
						b.WriteString(pick())
					}
					vs = append(vs, b.String())
				}
				s := scrubberOf(vs)
				var b strings.Builder
				for _, c := range streamText(rng, formsOf(vs), 1+rng.IntN(8)) {
					if rng.IntN(8) == 0 {
						b.WriteString(pick())
					}
					b.WriteRune(c)
				}
				x := []byte(b.String())
				o := newStreamOracle(s, x)
				for i := 0; i <= len(x); i++ {
					is.NoErr(o.check([]int{i}))
				}
				is.NoErr(o.check(everyByte(len(x))))
				for i := 0; i <= len(x); i += 3 {
					is.NoErr(checkDetector(s, x, []int{i}))
				}
			}
		})
	}
}

// TestStreamRegressions: texts that once went wrong.
func TestStreamRegressions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string
		text   string
	}{
		{
			// Round 1 mirrored round 0 while round 2, still reading
			// an escape, was cut off from its input.
			"a round after a mirroring one", []string{"\r/\r#u;A f\u200b"},
			"%5Cu000D%5Cu002F%=5Cu00 0D%5&Cu0023%5#&&#\\A\\\\\\r/\\\\\\\\r#u;A f\u200b&ltdata:é é9:",
		},
		{
			// The last '=' of a value escaped twice, then a line
			// break: a soft line break in round 1, not an '='.
			"a soft break after the value", []string{"sk/CAN4RY+&<q>\"j\\zz'op=="},
			"%2573k%252fC%2541N%2534R%2559%2B%2526%3C%2571%3E%2522j%255cz%257a%27%256fp%253d%3D\nc2svQ0FONFJaE&lt",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s := scrubberOf(tt.values)
			x := []byte(tt.text)
			o := newStreamOracle(s, x)
			for i := 0; i <= len(x); i++ {
				is.NoErr(o.check([]int{i}))
				is.NoErr(checkDetector(s, x, []int{i}))
			}
			is.NoErr(o.check(everyByte(len(x))))
		})
	}
}
