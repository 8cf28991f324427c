package redact

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// streamValues are held values of the kinds the property tests use:
// plain, with bytes every escape touches, hex digits only, non-ASCII,
// and one that overlaps the marker.
var streamValues = []string{
	"s3cr3tvalue-0123",
	"sk/CAN4RY+&<q>\"j\\zz'op==",
	"deadbeef00c0ffee",
	"päss wörd~42",
	"D]xyz_tok",
}

// streamSets are the sets of values registered together in the property
// tests: each value alone, all at once, and values whose forms hold one
// another (a match waiting for a longer one that starts earlier).
var streamSets = [][]string{
	{streamValues[0]}, {streamValues[1]}, {streamValues[2]}, {streamValues[3]}, {streamValues[4]},
	streamValues,
	{"tok-abcdef-99", "abcdef-9", "f-99xyz"},
}

// formsOf returns every form of every value in vs, in a fixed order.
func formsOf(vs []string) []string {
	var forms []string
	for _, v := range vs {
		fm := streamForms(v)
		names := make([]string, 0, len(fm))
		for n := range fm {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			forms = append(forms, fm[n])
		}
	}
	return forms
}

func scrubberOf(vs []string) *Scrubber {
	s := NewScrubber()
	for _, v := range vs {
		s.Register([]byte(v))
	}
	return s
}

// TestStreamOracle: random texts of held values in every form, in noise
// that starts escapes, breaks lines, looks like hex and overlaps the
// marker, each cut at every offset into two pieces, at random into three
// and into many, and into single bytes, give exactly what ScrubBody
// gives, or ErrEcho before the echo when ContainsDecoded finds one in
// that.
func TestStreamOracle(t *testing.T) {
	t.Parallel()
	for si, vs := range streamSets {
		t.Run(strings.Join(vs, ","), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s := scrubberOf(vs)
			forms := formsOf(vs)
			rng := rand.New(rand.NewPCG(uint64(si), 7))
			for range 30 {
				x := []byte(streamText(rng, forms, 1+rng.IntN(10)))
				o := newStreamOracle(s, x)
				for i := 0; i <= len(x); i++ {
					is.NoErr(o.check([]int{i}))
				}
				for range 8 {
					is.NoErr(o.check(randomCuts(rng, len(x), 2)))
					is.NoErr(o.check(randomCuts(rng, len(x), 1+rng.IntN(len(x)+1))))
				}
				is.NoErr(o.check(everyByte(len(x))))
			}
		})
	}
}

// TestStreamSplitForms: each form of a held value, in text, cut at every
// offset into two pieces, at each offset and a spread of later ones into
// three, and into single bytes.
func TestStreamSplitForms(t *testing.T) {
	t.Parallel()
	for _, v := range streamValues {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			s := scrubberOf([]string{v})
			for name, f := range streamForms(v) {
				t.Run(name, func(t *testing.T) {
					is := is.New(t)
					x := []byte("data: {\"k\":\"" + f + "\"}\n\n")
					o := newStreamOracle(s, x)
					// Every offset, and a spread of second offsets after
					// it; forms escaped many times over (kilobytes)
					// take every few offsets.
					for i := 0; i <= len(x); i += 1 + len(x)/400 {
						is.NoErr(o.check([]int{i}))
						for j := i + 1; j < len(x); j += 1 + len(x)/5 {
							is.NoErr(o.check([]int{i, j}))
						}
					}
					is.NoErr(o.check(everyByte(len(x))))
				})
			}
		})
	}
}

// TestStreamNoHoldBack: text whose end cannot begin a held value goes
// out at once, whole.
func TestStreamNoHoldBack(t *testing.T) {
	t.Parallel()
	s := NewScrubber()
	s.Register([]byte("s3cr3tvalue-0123"))
	tests := []struct {
		name, piece string
		held        int
	}{
		{"an event", "data: hello\n\n", 0},
		{"a JSON chunk", `data: {"choices":[{"delta":{"content":"Hi \"there\"\n"}}]}` + "\n\n", 0},
		{"a comment line", ": keep-alive\n\n", 0},
		{"ends with the start of the value", "data: s3cr", 4},
		{"ends with the start of its hex", "data: 73 33", 5},
		{"ends inside an escape", `data: \u00`, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			st := s.NewStream()
			out, err := st.Next(nil, []byte(tt.piece))
			is.NoErr(err)
			is.Equal(st.Held(), tt.held)
			is.Equal(string(out), tt.piece[:len(tt.piece)-tt.held])
		})
	}
}

// TestStreamPassThrough: with nothing registered (or no Scrubber) a
// Stream hands each piece back as it is, without a copy.
func TestStreamPassThrough(t *testing.T) {
	t.Parallel()
	for _, s := range []*Scrubber{nil, NewScrubber()} {
		is := is.New(t)
		st := s.NewStream()
		p := []byte("data: s3cr")
		out, err := st.Next(nil, p)
		is.NoErr(err)
		is.Equal(&out[0], &p[0]) // the piece itself
		is.Equal(st.Held(), 0)
		out, err = st.Next([]byte("x"), p)
		is.NoErr(err)
		is.Equal(string(out), "xdata: s3cr")
		out, err = st.Close(nil)
		is.NoErr(err)
		is.Equal(len(out), 0)
	}
}

// TestStreamEcho: an echo ContainsDecoded finds stops the stream before
// its first byte, and the error stays.
func TestStreamEcho(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const v = "s3cr3tvalue-0123"
	s := scrubberOf([]string{v})
	st := s.NewStream()
	out, err := st.Next(nil, []byte("data: ok\n\ndata: "+percentSome(v)[:9]))
	is.NoErr(err)
	is.Equal(string(out), "data: ok\n\ndata: ")
	out, err = st.Next(out, []byte(percentSome(v)[9:]+" more"))
	is.True(errors.Is(err, ErrEcho))
	is.Equal(string(out), "data: ok\n\ndata: ")
	_, err = st.Next(nil, []byte("x"))
	is.True(errors.Is(err, ErrEcho))
	_, err = st.Close(nil)
	is.True(errors.Is(err, ErrEcho))
}

// TestStreamMergesMarkers: a pattern that overlaps Redacted ("D]]]" after
// a marker's "D]") makes replacements chain; Scrub merges them into one
// marker, and a Stream agrees on every split.
func TestStreamMergesMarkers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string
		text   string
		want   string
	}{
		{"a chain", []string{"D]]]"}, "xD" + strings.Repeat("]", 20) + "y", "x[REDACTED]]y"},
		{"a value, then the chain", []string{"D]]]", "qqqq"}, "qqqq]]]]]]]]", "[REDACTED]"},
		{"overlap after a value", []string{"secretxyz", "D]xyz"}, "a secretxyzxyz b", "a [REDACTED] b"},
		{"two markers joined", []string{"D][R", "abcd"}, "abcdabcd", "[REDACTED]"},
		{"into a marker from the left", []string{"zz[RE", "abcd"}, "zzabcd.", "[REDACTED]."},
		{"no overlap", []string{"abcd"}, "abcd abcd", "[REDACTED] [REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s := scrubberOf(tt.values)
			out := s.Scrub(tt.text)
			is.Equal(out, tt.want)
			is.True(!s.Contains([]byte(out)))
			is.Equal(s.Scrub(out), out)
			x := []byte(tt.text)
			for i := 0; i <= len(x); i++ {
				is.NoErr(checkStream(s, x, []int{i}))
			}
			is.NoErr(checkStream(s, x, everyByte(len(x))))
		})
	}
}

// TestDetectorOracle: a Detector reports a hit on every split exactly
// when Contains or ContainsDecoded does on the whole text, and never
// releases the start of the match.
func TestDetectorOracle(t *testing.T) {
	t.Parallel()
	for si, vs := range streamSets {
		t.Run(strings.Join(vs, ","), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s := scrubberOf(vs)
			forms := formsOf(vs)
			rng := rand.New(rand.NewPCG(uint64(si), 11))
			for range 25 {
				x := []byte(streamText(rng, forms, 1+rng.IntN(8)))
				for i := 0; i <= len(x); i++ {
					is.NoErr(checkDetector(s, x, []int{i}))
				}
				for range 6 {
					is.NoErr(checkDetector(s, x, randomCuts(rng, len(x), 2)))
					is.NoErr(checkDetector(s, x, randomCuts(rng, len(x), 1+rng.IntN(len(x)+1))))
				}
				is.NoErr(checkDetector(s, x, everyByte(len(x))))
			}
		})
	}
}

// TestDetectorRelease: plain text is released at once; the start of a
// value is held; a hit stops the release.
func TestDetectorRelease(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const v = "s3cr3tvalue-0123"
	s := scrubberOf([]string{v})
	d := s.NewDetector()
	rel, hit := d.Next([]byte(`{"q":"hello"} s3cr`))
	is.True(!hit)
	is.Equal(rel, 14)
	is.Equal(d.Held(), 4)
	rel, hit = d.Next([]byte("3tvalue-0123 and more"))
	is.True(hit)
	is.Equal(rel, 14)
	_, hit = d.Close()
	is.True(hit)

	var none *Scrubber
	d = none.NewDetector()
	rel, hit = d.Next([]byte("s3cr"))
	is.Equal(rel, 4)
	is.True(!hit)
}

// TestStreamBytewiseLarge: a 256 KiB body in 1-byte pieces gives the
// same as in one piece (the cost is BenchmarkStreamBytewise's).
func TestStreamBytewiseLarge(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := benchScrubber()
	body := sseBody(256 << 10)
	st := s.NewStream()
	var out []byte
	var err error
	for i := range body {
		out, err = st.Next(out, body[i:i+1])
		is.NoErr(err)
		is.True(st.Held() < 256)
	}
	out, err = st.Close(out)
	is.NoErr(err)
	is.True(bytes.Equal(out, body))
}

// TestStreamLongValue: a value of a few KiB (a PEM key) in its longest
// forms, cut into pieces of 1, 7 and 4096 bytes: the rings that keep a
// partial match grow to hold it.
func TestStreamLongValue(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	v := make([]byte, 3000)
	for i := range v {
		v[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/\n"[rng.IntN(65)]
	}
	s := scrubberOf([]string{string(v)})
	forms := map[string]string{
		"raw":        string(v),
		"json":       strings.ReplaceAll(string(v), "\n", `\n`),
		"sep hex":    sepHex(string(v), ":", false, 0, ""),
		"percent":    percentSome(string(v)),
		"invisibles": interleave(string(v[:200]), "\u200b", 0, "") + string(v[200:]),
	}
	for name, f := range forms {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			o := newStreamOracle(s, []byte("data: "+f+" end\n\n"))
			for _, n := range []int{1, 7, 4096} {
				var cuts []int
				for i := n; i < len(o.text); i += n {
					cuts = append(cuts, i)
				}
				is.NoErr(o.check(cuts))
			}
		})
	}
}

// TestStreamTailPrefix: a body that ends with a proper prefix of a form
// of a held value, MinTailPrefix bytes or longer, ends with Redacted
// instead, whole or in pieces; a shorter tail, or one that more text
// follows, goes out as it is.
func TestStreamTailPrefix(t *testing.T) {
	t.Parallel()
	value := "s3cr3tvalue-0123"
	s := scrubberOf([]string{value})
	hexed := fmt.Sprintf("%x", value)
	for _, tt := range []struct {
		name, text, want string
	}{
		{"all but the last byte", "key: " + value[:len(value)-1], "key: " + Redacted},
		{"the shortest replaced", "key: " + value[:MinTailPrefix], "key: " + Redacted},
		{"too short to replace", "key: " + value[:MinTailPrefix-1], "key: " + value[:MinTailPrefix-1]},
		{"a prefix with text after it", "key: " + value[:8] + " and more", "key: " + value[:8] + " and more"},
		{"the whole value", "key: " + value, "key: " + Redacted},
		{"a prefix of the hex form", "hex " + hexed[:20], "hex " + Redacted},
		{"after a replaced value", value + " " + value[:6], Redacted + " " + Redacted},
		{"nothing held", "plain text", "plain text"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(string(s.ScrubBody([]byte(tt.text))), tt.want)
			for i := 0; i <= len(tt.text); i++ {
				st := s.NewStream()
				out, err := st.Next(nil, []byte(tt.text[:i]))
				is.NoErr(err)
				out, err = st.Next(out, []byte(tt.text[i:]))
				is.NoErr(err)
				out, err = st.Close(out)
				is.NoErr(err)
				is.Equal(string(out), tt.want) // cut at i
			}
		})
	}
	// ScrubBody never writes into the caller's body.
	body := []byte("key: " + value[:10])
	_ = s.ScrubBody(body)
	is.New(t).Equal(string(body), "key: "+value[:10])
}

// TestScrubField: a field value that ends with a proper prefix of a form
// (MinTailPrefix bytes or more) ends with Redacted; a shorter one, or one
// with text after it, is scrubbed as Scrub scrubs it.
func TestScrubField(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	value := "s3cr3tvalue-0123"
	s := scrubberOf([]string{value})
	is.Equal(s.ScrubField("k="+value[:len(value)-1]), "k="+Redacted)
	is.Equal(s.ScrubField("k="+value[:MinTailPrefix-1]), "k="+value[:MinTailPrefix-1])
	is.Equal(s.ScrubField("k="+value[:8]+";x"), "k="+value[:8]+";x")
	is.Equal(s.ScrubField(value+","+value[:5]), Redacted+","+Redacted)
	is.Equal(s.ScrubField(""), "")
	var none *Scrubber
	is.Equal(none.ScrubField("k="+value[:9]), "k="+value[:9])
}
