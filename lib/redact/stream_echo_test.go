package redact

import (
	"errors"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestStreamEchoPrefix: the text before an echo goes out with ErrEcho,
// up to the first byte of the echo's match in the text, however the
// body is cut, and later calls hand out nothing.
func TestStreamEchoPrefix(t *testing.T) {
	t.Parallel()
	const v = "CANARY-egressd-e2e-5c1d9a"
	plain := strings.Repeat("a", 5000)
	pct2 := strings.ReplaceAll(percentAll(v), "%", "%25")
	tests := []struct {
		name       string
		before     string // handed out with ErrEcho
		echo, tail string
	}{
		{"json escaped", plain + `{"echo":"`, uEvery(v), `"}`},
		{"percent escaped twice", plain + "q=", pct2, "&x=1"},
		{"escaped twice", plain + `{"echo":"`, strings.ReplaceAll(uEvery(v), `\`, `\\`), `"}`},
		{"at the start", "", uEvery(v), `"}`},
		{"after an escape", `caf\u00e9 50% ` + plain, pct2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s := scrubberOf([]string{v})
			text := []byte(tt.before + tt.echo + tt.tail)
			is.True(s.ContainsDecoded(s.ScrubBytes(text))) // an echo, not a form Scrub replaces
			// In one piece, cut before, inside and after the echo, and
			// one byte at a time around it.
			n, m := len(tt.before), len(tt.before)+len(tt.echo)
			cutss := [][]int{nil, {n}, {n + 1}, {n + 7}, {m - 1}, {m}, {n / 2, n + 3, m - 2}}
			var bytewise []int
			for i := max(n-40, 1); i < min(m+3, len(text)); i++ {
				bytewise = append(bytewise, i)
			}
			cutss = append(cutss, bytewise)
			for _, cuts := range cutss {
				got, err := streamPieces(s, text, cuts)
				is.True(errors.Is(err, ErrEcho)) // cuts
				is.Equal(string(got), tt.before) // cuts
			}
		})
	}
}

// TestStreamEchoSticks: after ErrEcho, Next and Close hand out nothing.
func TestStreamEchoSticks(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const v = "CANARY-egressd-e2e-5c1d9a"
	s := scrubberOf([]string{v})
	st := s.NewStream()
	out, err := st.Next(nil, []byte(`ok {"echo":"`+uEvery(v)))
	is.True(errors.Is(err, ErrEcho))
	is.Equal(string(out), `ok {"echo":"`)
	out, err = st.Next(nil, []byte("more"))
	is.True(errors.Is(err, ErrEcho))
	is.Equal(len(out), 0)
	out, err = st.Close(nil)
	is.True(errors.Is(err, ErrEcho))
	is.Equal(len(out), 0)
}
