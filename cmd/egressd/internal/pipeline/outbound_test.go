package pipeline

import (
	"encoding/base64"
	"encoding/hex"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/matryer/is"

	"hostkit.dev/cmd/egressd/internal/request"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// otherPh is a placeholder of a second invocation (foreign to "inv").
const otherPh = "hkp_zyxwvutsrqponmlkjihgfedcba765432"

// outboundFixture registers inv (canary, ph) and inv-2 (another value,
// otherPh): the values and placeholders the scans look for.
func outboundFixture(t testing.TB) *fixture {
	t.Helper()
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease("https://api.test", "header:Authorization", "Bearer {}")}, "https://api.test")
	f.register("inv-2", []secretdapi.Lease{{Credential: "two", Destination: "https://two.test", Placeholder: otherPh,
		Target: "header:X-Key", Value: []byte("second-" + canary)}}, "https://two.test")
	return f
}

// buffered is the oracle: the code the buffered scan of a whole request
// body gives (Placements' manual check and placeholder search, then
// Scan), "" for a clean body.
func (f *fixture) buffered(body []byte, req bool) string {
	rec := &request.Record{Path: "/", Body: body}
	if req {
		if err := f.p.scan.Manual(rec); err != nil {
			return wire.CodeOf(err)
		}
		if f.p.knownPlaceholder(rec, nil) {
			return egressdapi.CodePlaceholderMisuse
		}
		if err := f.p.scan.Request(rec); err != nil {
			return wire.CodeOf(err)
		}
		return ""
	}
	if err := f.p.ScanMessage(body); err != nil {
		return wire.CodeOf(err)
	}
	return ""
}

// streamed feeds body to an Outbound cut at cuts (increasing offsets)
// and returns its code ("" when clean), the most it released before a
// refusal and the most it held back at once.
func streamed(f *fixture, body []byte, cuts []int, req bool) (code string, released int64, held int64) {
	o := f.p.NewOutbound(req)
	prev := 0
	for _, c := range append(cuts, len(body)) {
		rel, err := o.Next(body[prev:c])
		if rel > int64(c) {
			panic("released more than read")
		}
		released = max(released, rel)
		held = max(held, o.Held())
		prev = c
		if err != nil {
			return wire.CodeOf(err), released, held
		}
	}
	rel, err := o.Close()
	if err != nil {
		return wire.CodeOf(err), released, held
	}
	if rel != int64(len(body)) {
		panic("a clean body not released whole")
	}
	return "", rel, held
}

// outboundCase is a body, where its finding starts (-1: none) and how
// far the scan may release into it (a base64 form's first characters
// may hold bits of the text before it).
type outboundCase struct {
	name  string
	body  string
	at    int
	slack int
}

// pre and post surround each case's text: a JSON body.
const pre, post = "{\"a\":\"x y\",\"z\":\"", "\",\"q\":1}\n"

func outboundCases() []outboundCase {
	form := func(name, s string, slack int) outboundCase {
		return outboundCase{name, pre + s + post, len(pre), slack}
	}
	clean := func(name, s string) outboundCase { return outboundCase{name, pre + s + post, -1, 0} }
	pct := func(s string) string { // every byte percent-encoded
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{s[i]})))
		}
		return b.String()
	}
	return []outboundCase{
		form("raw value", canary, 0),
		form("other invocation's value", "second-"+canary, 0),
		form("url-escaped value", url.QueryEscape(canary), 0),
		form("every byte percent-encoded", pct(canary), 0),
		form("base64", base64.StdEncoding.EncodeToString([]byte(canary)), 0),
		form("base64 after one byte", base64.StdEncoding.EncodeToString([]byte("."+canary)), 4),
		form("hex", hex.EncodeToString([]byte(canary)), 0),
		form("json unicode escapes", uEscape(canary), 0),
		form("hex with separators", sepHex(canary), 0),
		form("zero-width inserted", canary[:5]+"\u200b"+canary[5:], 0),
		form("own placeholder", ph, 0),
		form("foreign placeholder", otherPh, 0),
		form("placeholder upper case", strings.ToUpper(otherPh), 0),
		form("placeholder with a Kelvin sign", "h\u212ap_"+otherPh[4:], 0),
		form("placeholder percent-encoded", pct(otherPh), 0),
		form("placeholder encoded twice", url.QueryEscape(pct(otherPh)), 0),
		form("placeholder after an unknown one", "hkp_"+strings.Repeat("a", 29)+otherPh, 33),
		{"body is the value", canary, 0, 0},
		clean("clean", "nothing held here hkp_ hkp_short %41%4"),
		clean("unknown placeholder", "hkp_"+strings.Repeat("q", 32)),
		clean("proper prefix of the value", canary[:len(canary)-1]),
		clean("proper prefix of a placeholder", otherPh[:35]),
	}
}

func uEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(`\u00` + hex.EncodeToString([]byte{byte(r)}))
	}
	return b.String()
}

func sepHex(s string) string {
	h := hex.EncodeToString([]byte(s))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

// TestOutboundMatchesBuffered holds the incremental scan to the buffered
// one, for request bodies and WebSocket messages: the same refusal and
// code for the body whole, cut in two at every offset, in three at every
// pair of offsets and byte by byte, and at random; never a byte of the
// finding released; a clean body released whole.
func TestOutboundMatchesBuffered(t *testing.T) {
	t.Parallel()
	f := outboundFixture(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range outboundCases() {
		for _, req := range []bool{true, false} {
			t.Run(tc.name+map[bool]string{true: "/request", false: "/message"}[req], func(t *testing.T) {
				is := is.New(t)
				body := []byte(tc.body)
				want := f.buffered(body, req)
				is.True((want != "") == (tc.at >= 0)) // the case is what it says
				check := func(cuts []int) {
					code, rel, _ := streamed(f, body, cuts, req)
					if code != want {
						t.Fatalf("cuts %v: code %q, buffered %q", cuts, code, want)
					}
					if want != "" && rel > int64(tc.at+tc.slack) {
						t.Fatalf("cuts %v: released %d bytes, the finding starts at %d", cuts, rel, tc.at)
					}
				}
				check(nil)
				for i := 0; i <= len(body); i++ {
					check([]int{i})
				}
				// Three pieces: every pair of offsets on a grid, and every
				// pair up to 12 bytes apart from the finding's start on.
				step := max(1, len(body)/8)
				for i := 0; i <= len(body); i += step {
					for j := i; j <= len(body); j += step {
						check([]int{i, j})
					}
				}
				for i := max(tc.at, 0); i <= len(body)-len(post); i++ {
					for j := i + 1; j <= min(len(body), i+12); j++ {
						check([]int{i, j})
					}
				}
				ones := make([]int, 0, len(body))
				for i := 1; i < len(body); i++ {
					ones = append(ones, i)
				}
				check(ones)
				for range 20 {
					check(randomCuts(rng, len(body)))
				}
			})
		}
	}
}

func randomCuts(rng *rand.Rand, n int) []int {
	var cuts []int
	for at := rng.IntN(8); at < n; at += 1 + rng.IntN(12) {
		cuts = append(cuts, at)
	}
	return cuts
}

// TestOutboundHoldBack: a clean body's hold-back is only a suffix that
// may begin a finding: text that cannot (JSON of plain words) leaves at
// once, a partial placeholder or escape waits, and a large body passes
// with a small constant hold-back.
func TestOutboundHoldBack(t *testing.T) {
	t.Parallel()
	f := outboundFixture(t)
	for _, tc := range []struct {
		name    string
		pieces  []string
		maxHeld int64 // after the last piece
	}{
		{"plain json", []string{`{"model":"m","input":"hello there"}`}, 0},
		{"partial placeholder", []string{`{"k":"hkp_abc`}, int64(len("hkp_abc"))},
		{"partial escape", []string{`{"k":"a%2`}, 2},
		{"partial rune", []string{"{\"k\":\"\xe2\x84"}, 2},
		{"hold released by what follows", []string{`{"k":"hkp_abc`, `!"}`}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			o := f.p.NewOutbound(true)
			for _, p := range tc.pieces {
				_, err := o.Next([]byte(p))
				is.NoErr(err)
			}
			is.True(o.Held() <= tc.maxHeld)
			_, err := o.Close()
			is.NoErr(err)
			is.Equal(o.Held(), int64(0))
		})
	}
	t.Run("1 MiB of text", func(t *testing.T) {
		is := is.New(t)
		o := f.p.NewOutbound(true)
		chunk := []byte(strings.Repeat(`{"delta":"some text, 42 of it"}`+"\n", 1000))
		var worst int64
		for o.Read() < 1<<20 {
			_, err := o.Next(chunk)
			is.NoErr(err)
			worst = max(worst, o.Held())
		}
		is.True(worst <= int64(redact.MaxDecodedSpan(len("second-"+canary))))
	})
}

// FuzzOutbound holds the incremental scan to the buffered one on any
// body cut anywhere: the same verdict and code (for a body with one kind
// of finding), a clean body released whole.
func FuzzOutbound(f *testing.F) {
	for _, tc := range outboundCases() {
		f.Add([]byte(tc.body), uint16(7), true)
	}
	f.Add([]byte("%%41hkp_%48KP_"), uint16(3), false)
	f.Add([]byte("\xe2\x84"), uint16(1), true)
	fx := outboundFixture(f)
	f.Fuzz(func(t *testing.T, body []byte, seed uint16, req bool) {
		if len(body) > 4096 {
			return
		}
		want := fx.buffered(body, req)
		rng := rand.New(rand.NewPCG(uint64(seed), 3))
		code, _, _ := streamed(fx, body, randomCuts(rng, len(body)), req)
		if (code == "") != (want == "") {
			t.Fatalf("streamed %q, buffered %q", code, want)
		}
		// A body with several kinds of finding may have them reported in
		// another order; a body with one kind gets its code.
		rec := &request.Record{Path: "/", Body: body}
		both := fx.p.knownPlaceholder(rec, nil) && fx.p.scan.Request(rec) != nil
		if !both && code != want {
			t.Fatalf("streamed %q, buffered %q", code, want)
		}
	})
}

// BenchmarkOutbound measures the scan of a binary body (the upload
// tests' pattern: random bytes) and of JSON text, with one value and
// two placeholders held; phScan alone is the placeholder finder's part.
func BenchmarkOutbound(b *testing.B) {
	f := outboundFixture(b)
	rng := rand.New(rand.NewPCG(5, 6))
	random := make([]byte, 1<<20)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	text := []byte(strings.Repeat(`{"delta":"some text, 42 of it","id":"x"}`+"\n", (1<<20)/41))
	for _, in := range []struct {
		name string
		body []byte
	}{{"binary", random}, {"json", text}} {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.body)))
			for b.Loop() {
				o := f.p.NewOutbound(true)
				for p := in.body; len(p) > 0; p = p[min(len(p), 32<<10):] {
					if _, err := o.Next(p[:min(len(p), 32<<10)]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(in.name+"/phScan", func(b *testing.B) {
			b.SetBytes(int64(len(in.body)))
			for b.Loop() {
				s := newPhScan(f.p.isPlaceholder)
				s.write(in.body, 0)
			}
		})
	}
}

// TestLowerToASCII: the placeholder finder's lowering relies on U+0130
// and U+212A being the only non-ASCII runes that lower to ASCII.
func TestLowerToASCII(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	got := map[rune]rune{}
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if l := unicode.ToLower(r); l < utf8.RuneSelf {
			got[r] = l
		}
	}
	is.Equal(got, map[rune]rune{0x130: 'i', 0x212a: 'k'})
}

// TestBodyTarget: a body is read whole exactly when the bundle places a
// credential in a body (a JSON-pointer target) of a request to that
// credential's destination; any other body may stream.
func TestBodyTarget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureConfig{})
	f.register("inv", []secretdapi.Lease{lease("https://api.test", "body:/auth/key", "")}, "https://api.test", "https://other.test")
	f.register("inv-h", []secretdapi.Lease{{Credential: "h", Destination: "https://api.test", Placeholder: otherPh,
		Target: "header:Authorization", Template: "Bearer {}", Value: []byte("h-" + canary)}}, "https://api.test")
	b, _ := f.reg.Get("inv")
	h, _ := f.reg.Get("inv-h")
	for _, tc := range []struct {
		name  string
		b     bool // inv (a body target), else inv-h (a header target)
		url   string
		whole bool
	}{
		{"body target, its destination", true, "https://api.test/v1", true},
		{"body target, its destination with the port spelled", true, "https://API.test:443/v1", true},
		{"body target, another origin", true, "https://other.test/v1", false},
		{"body target, plaintext", true, "http://api.test/v1", false},
		{"body target, URL that does not parse", true, "https://api.test:x/", true},
		{"header target", false, "https://api.test/v1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			bb := h
			if tc.b {
				bb = b
			}
			is.Equal(f.p.BodyTarget(bb, tc.url), tc.whole)
		})
	}
}
