package redact

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// The quiet fast path (quick.go) must change nothing a Stream or a
// Detector does: the tests here run each text through one with it and
// one that reads every byte the long way (views.slow), and compare what
// they hand out, hold and report after every piece; and they check the
// buffered oracle on texts made to hit the fast path's edges.

// compareQuick runs text, cut at cuts, through a Stream and a Detector
// of s with and without the fast path, and reports the first piece
// after which they differ.
func compareQuick(s *Scrubber, text []byte, cuts []int) error {
	fast, slow := s.NewStream(), s.NewStream()
	fd, sd := s.NewDetector(), s.NewDetector()
	if slow.v != nil {
		slow.v.slow, sd.v.slow = true, true
	}
	var fo, so []byte
	var ferr, serr error
	last := 0
	for _, c := range append(cuts, len(text)) {
		p := text[last:c]
		fo, ferr = fast.Next(fo, p)
		so, serr = slow.Next(so, p)
		if !bytes.Equal(fo, so) || ferr != serr || fast.Held() != slow.Held() {
			return fmt.Errorf("cuts %v, piece ending at %d: fast %q, %v, held %d; slow %q, %v, held %d",
				cuts, c, fo, ferr, fast.Held(), so, serr, slow.Held())
		}
		fr, fh := fd.Next(p)
		sr, sh := sd.Next(p)
		if fr != sr || fh != sh {
			return fmt.Errorf("cuts %v, piece ending at %d: detector fast %d, %v; slow %d, %v", cuts, c, fr, fh, sr, sh)
		}
		last = c
	}
	fo, ferr = fast.Close(fo)
	so, serr = slow.Close(so)
	if !bytes.Equal(fo, so) || ferr != serr {
		return fmt.Errorf("cuts %v, close: fast %q, %v; slow %q, %v", cuts, fo, ferr, so, serr)
	}
	fr, fh := fd.Close()
	sr, sh := sd.Close()
	if fr != sr || fh != sh {
		return fmt.Errorf("cuts %v, close: detector fast %d, %v; slow %d, %v", cuts, fr, fh, sr, sh)
	}
	return nil
}

// TestStreamQuickBodies: long bodies of each kind the benchmarks use
// (SSE with escapes, printable words, random bytes), with held values
// sprinkled in some of them, in random pieces: the fast path hands out,
// holds and reports exactly what the long way does.
func TestStreamQuickBodies(t *testing.T) {
	t.Parallel()
	bodies := map[string][]byte{
		"sse":    sseBody(48 << 10),
		"text":   textBody(48 << 10),
		"binary": binaryBody(48 << 10),
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(len(name)), 5))
			for si, vs := range append([][]string{{"secret-value-03-5cd5"}}, streamSets...) {
				is := is.New(t)
				s := scrubberOf(vs)
				x := body
				if si%2 == 1 {
					// Forms of the values at random places.
					forms := formsOf(vs)
					var b []byte
					for at := 0; at < len(body); {
						n := rng.IntN(4 << 10)
						b = append(b, body[at:min(at+n, len(body))]...)
						b = append(b, forms[rng.IntN(len(forms))]...)
						at += n
					}
					x = b
				}
				is.NoErr(compareQuick(s, x, randomCuts(rng, len(x), 1+rng.IntN(64))))
				is.NoErr(compareQuick(s, x, randomCuts(rng, len(x), 1+rng.IntN(2048))))
			}
		})
	}
}

// quickEdges are texts at the fast path's edges, each of which the
// tests cut at every offset: a form right after a long run of bytes
// that wake no lane, and right after each byte quick reads without the
// long way (escapes it decodes, line breaks, a literal introducer, a
// lead byte that begins no invisible character), and escapes and
// separated hex that a cut can split.
func quickEdges(forms []string) [][]byte {
	skippable := strings.Repeat("QqWwYy", 8)
	inert := []string{`\"`, `\u00e9`, `\n`, `\n\n`, `\n\r\n`, "\n", "\r\n\n\n", "+", "%zz", "% ", `\q`, "&x;", "& ", "&amp", "\xe2\x82\xac", "\xc2\xa0", "\xef\xbc\x81", "=zz", "=4z"}
	var out [][]byte
	for i, f := range forms {
		out = append(out,
			[]byte(skippable+f+skippable),
			[]byte(skippable+inert[i%len(inert)]+f+inert[(i+1)%len(inert)]+skippable),
			[]byte(f[:len(f)/2]+inert[(i+2)%len(inert)]+f[len(f)/2:]),
			[]byte("data: "+inert[(i+3)%len(inert)]+f+`\u00`),
			// A byte that may begin the form, then line breaks
			// (which the views without them drop) and the form.
			[]byte(skippable+f[:1]+"\n"+f[1:]+" "+f[:1]+"\r\n"+f+f[:1]+"\n\n\n"+f[:1]),
			// ... then a byte every view reads as itself.
			[]byte(skippable+f[:1]+inert[i%len(inert)]+f+f[:1]+inert[(i+5)%len(inert)]+f[:1]),
		)
	}
	for _, x := range inert {
		out = append(out, []byte(skippable+x+"7"+x+"3 73:33"+x))
	}
	// Stops next to stops: a line-break run ended by a literal
	// introducer, '+' or a lead byte (one that begins an invisible
	// character too); escapes, names and leads decided by a line break,
	// '+' or a lead; each right after a byte that may begin the form.
	stacked := []string{"\n%zz", "\r\n&x ", "\n+", "\n\xe2\x82\xac", "\n\xe2\x80\x8b", `\n\n+`, `\n` + "\xc2\xad",
		`\r\n%zz`, "%\n", "\\\n", "=4\r\n", `\u00` + "\n", "%+", "\\+", "&amp\n", "&x+", "&\xe2\x82\xac",
		"\xe2+", "\xe2\n\x80\x8b", "\xef\xbb\n", "\xc2\xc2\xad", "\xe2%zz", `\n"}`, `\u00e9\n`}
	for k, x := range stacked {
		f := forms[k%len(forms)]
		y := stacked[(k+5)%len(stacked)]
		out = append(out, []byte(skippable+f[:1]+x+f+f[:1]+y+f[1:]+" "+f[:1]+x+f[:1]+y+skippable))
	}
	return out
}

// TestStreamQuickEdges: the texts of quickEdges for each set of values,
// cut at every offset (a form that begins right at a piece's start, an
// escape cut in two), give what ScrubBody gives (or ErrEcho where
// ContainsDecoded finds an echo), and the same as the long way.
func TestStreamQuickEdges(t *testing.T) {
	t.Parallel()
	for _, vs := range streamSets {
		t.Run(strings.Join(vs, ","), func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			s := scrubberOf(vs)
			// Some of the forms (escaped many times over, they run to
			// kilobytes): every offset of every text costs the most.
			rng := rand.New(rand.NewPCG(uint64(len(vs)), 9))
			forms := formsOf(vs)
			rng.Shuffle(len(forms), func(i, j int) { forms[i], forms[j] = forms[j], forms[i] })
			forms = forms[:min(len(forms), 8)]
			for _, x := range quickEdges(forms) {
				o := newStreamOracle(s, x)
				for i := 0; i <= len(x); i += 1 + len(x)/300 {
					is.NoErr(o.check([]int{i}))
					is.NoErr(compareQuick(s, x, []int{i}))
				}
				is.NoErr(checkDetector(s, x, []int{len(x) / 2}))
				is.NoErr(compareQuick(s, x, everyByte(len(x))))
			}
		})
	}
}

// FuzzStreamQuick compares the fast path with the long way
// (compareQuick) for a fuzzer-chosen value, text and cutting, and
// checks the buffered oracle too.
func FuzzStreamQuick(f *testing.F) {
	for _, x := range quickEdges([]string{"s3cr3tvalue-0123", "73:33:63", "s3cr%33tv"}) {
		f.Add([]byte("s3cr3tvalue-0123"), x, []byte{7, 200, 1, 1, 90})
	}
	f.Add([]byte("deadbeef00c0ffee"), []byte("de ad be ef 00 c0 ff ee\\u00e9 x"), []byte{3, 5})
	f.Add([]byte("p\u00e4ss&w"), binaryBody(300), []byte{31, 255, 17})
	f.Fuzz(func(t *testing.T, value, text, cuts []byte) {
		s := NewScrubber()
		s.Register(value)
		c := fuzzCuts(len(text), cuts)
		if err := compareQuick(s, text, c); err != nil {
			t.Fatal(err)
		}
		if err := checkStream(s, text, c); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStreamFreshAllocs: a fresh Stream and Detector, and one that has
// read a few KiB in which nothing wakes a lane, hold a few KiB at most:
// the rings that map a partial match back to the text are made when a
// partial match first needs them.
func TestStreamFreshAllocs(t *testing.T) {
	is := is.New(t) // not parallel: it reads the process's allocation count
	s := benchScrubber()
	s.NewStream() // the automata, built once for the Scrubber's values
	piece := []byte(strings.Repeat("data: {\"k\":\"QqWwYy\"}\n\n", 200))
	out := make([]byte, 0, 2*len(piece))
	const runs = 100
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		st := s.NewStream()
		o, err := st.Next(out[:0], piece)
		is.NoErr(err)
		is.Equal(len(o), len(piece))
		d := s.NewDetector()
		d.Next(piece)
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / runs
	t.Logf("a Stream and a Detector, each after %d bytes: %d B, %d allocations", len(piece), per, (after.Mallocs-before.Mallocs)/runs)
	is.True(per <= 16<<10) // a Stream and a Detector: about 7 KiB each
	allocs := testing.AllocsPerRun(runs, func() { s.NewStream() })
	is.True(allocs <= 12)
}

// TestStreamInPlace: a piece read into the buffer the output goes to
// (dst and p share their bytes) is scrubbed as a copy would be.
func TestStreamInPlace(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := scrubberOf(streamValues)
	text := []byte("data: s3cr3tvalue-0123 \\u00e9 73:33:63 s3cr3tval")
	want := s.ScrubBody(text)
	st := s.NewStream()
	buf := make([]byte, 0, 4*len(text))
	var out []byte
	for i := 0; i < len(text); i += 5 {
		piece := text[i:min(i+5, len(text))]
		b := append(buf[:0], piece...)
		o, err := st.Next(b[:0], b)
		is.NoErr(err)
		out = append(out, o...)
	}
	o, err := st.Close(nil)
	is.NoErr(err)
	is.Equal(string(append(out, o...)), string(want))
}
