package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/matryer/is"
)

const canary = "canary-7f3a9c21-secret"

// specialCanary needs percent-encoding.
const specialCanary = "canary/7f3a+9c21 s&cret=?"

func TestScrubEncodings(t *testing.T) {
	t.Parallel()
	s := NewScrubber()
	s.Register([]byte(canary))
	s.Register([]byte(specialCanary))
	b64 := func(e *base64.Encoding, v string) string { return e.EncodeToString([]byte(v)) }
	tests := []struct {
		name, secret, form string
	}{
		{"raw", canary, canary},
		{"query escape", specialCanary, url.QueryEscape(specialCanary)},
		{"path escape", specialCanary, url.PathEscape(specialCanary)},
		{"query escape lower", specialCanary, lowerPercentHex(url.QueryEscape(specialCanary))},
		{"path escape lower", specialCanary, lowerPercentHex(url.PathEscape(specialCanary))},
		{"base64 std", specialCanary, b64(base64.StdEncoding, specialCanary)},
		{"base64 raw std", specialCanary, b64(base64.RawStdEncoding, specialCanary)},
		{"base64 url", specialCanary, b64(base64.URLEncoding, specialCanary)},
		{"base64 raw url", specialCanary, b64(base64.RawURLEncoding, specialCanary)},
		{"hex", canary, hex.EncodeToString([]byte(canary))},
		{"hex upper", canary, strings.ToUpper(hex.EncodeToString([]byte(canary)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			in := "before " + tt.form + " after"
			out := s.Scrub(in)
			is.Equal(out, "before "+Redacted+" after")
			is.True(!s.Contains([]byte(out)))
			is.True(s.Contains([]byte(in)))
			is.Equal(string(s.ScrubBytes([]byte(in))), out)
		})
	}
}

// TestScrubBase64Alignments embeds the canary at every offset mod 3 inside
// a longer base64 blob, as in the Basic credentials of "user:"+canary.
func TestScrubBase64Alignments(t *testing.T) {
	t.Parallel()
	s := NewScrubber()
	s.Register([]byte(canary))
	for _, prefix := range []string{"", "u", "us", "user:", "admin:", "x:"} {
		for _, suffix := range []string{"", "!", "!!", "trailing"} {
			for name, enc := range map[string]*base64.Encoding{"std": base64.StdEncoding, "rawurl": base64.RawURLEncoding} {
				t.Run(name+"|"+prefix+"|"+suffix, func(t *testing.T) {
					is := is.New(t)
					blob := enc.EncodeToString([]byte(prefix + canary + suffix))
					out := s.Scrub("Authorization: Basic " + blob)
					is.True(strings.Contains(out, Redacted))
					is.True(!s.Contains([]byte(out)))
					for k := range 3 {
						for _, e := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
							is.True(!strings.Contains(out, stableBase64([]byte(canary), k, e)))
						}
					}
				})
			}
		}
	}
}

func TestScrubUnregisterAndShort(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	unreg := s.Register([]byte(canary))
	s.Register([]byte("abc"))  // too short: ignored
	s.Register([]byte("DACT")) // inside Redacted: ignored
	is.Equal(s.Scrub("x abc DACT "+canary), "x abc DACT "+Redacted)
	unreg()
	unreg() // idempotent
	is.Equal(s.Scrub(canary), canary)
	var nilS *Scrubber
	is.Equal(nilS.Scrub(canary), canary)
	is.True(!nilS.Contains([]byte(canary)))
}

func TestScrubOverlapsRedacted(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	s.Register([]byte("secretxyz"))
	s.Register([]byte("D]xyz"))
	out := s.Scrub("a secretxyzxyz b")
	is.True(!s.Contains([]byte(out)))
	is.Equal(s.Scrub(out), out)
}

func TestScrubLongestFirst(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	s.Register([]byte("abcd"))
	s.Register([]byte("abcdefgh"))
	is.Equal(s.Scrub("xabcdefghx abcdx"), "x"+Redacted+"x "+Redacted+"x")
}

func TestScrubNoMatchAllocs(t *testing.T) {
	is := is.New(t)
	text := strings.Repeat("GET /v1/items?page=2 HTTP/1.1 host=api.example.com ", 20)
	empty := NewScrubber()
	is.Equal(testing.AllocsPerRun(100, func() { _ = empty.Scrub(text) }), 0.0)
	s := NewScrubber()
	s.Register([]byte(canary))
	s.Register([]byte(specialCanary))
	is.Equal(testing.AllocsPerRun(100, func() { _ = s.Scrub(text) }), 0.0)
	b := []byte(text)
	is.Equal(testing.AllocsPerRun(100, func() { _ = s.ScrubBytes(b) }), 0.0)
}

func TestScrubConcurrent(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			v := []byte(strings.Repeat(string(rune('a'+i)), 12))
			for range 50 {
				unreg := s.Register(v)
				_ = s.Scrub("x " + string(v) + " y")
				unreg()
			}
		})
	}
	wg.Wait()
	s.Register([]byte(canary))
	is.Equal(s.Scrub(canary), Redacted)
}

// TestScrubJSONEscapes: a value echoed inside a JSON document, as real
// encoders escape it, is found before a client decodes it (a JSON decoder
// would turn any of these forms back into the raw value); the same value
// also decodes to nothing raw after scrubbing.
func TestScrubJSONEscapes(t *testing.T) {
	t.Parallel()
	values := []string{`sk/CAN4RY+&<q>"j\zz`, "pässwörd-\U0001D11E-canary\ttab", canary}
	s := NewScrubber()
	for _, v := range values {
		s.Register([]byte(v))
	}
	goJSON := func(v string, html bool) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if err := enc.Encode(map[string]string{"echo": v}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	python := func(v string, asciiOnly bool) string {
		flag := "True"
		if !asciiOnly {
			flag = "False"
		}
		cmd := exec.Command("/usr/bin/python3", "-c",
			"import json,sys; print(json.dumps({'echo': sys.stdin.read()}, ensure_ascii="+flag+"))")
		cmd.Stdin = strings.NewReader(v)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("python3: %v", err)
		}
		return string(out)
	}
	for _, v := range values {
		docs := map[string]string{
			"go":                   goJSON(v, true),
			"go no html":           goJSON(v, false),
			"php slashes":          strings.ReplaceAll(goJSON(v, false), "/", `\/`),
			"php slashes and html": strings.ReplaceAll(goJSON(v, true), "/", `\/`),
			"python ascii":         python(v, true),
			"python utf-8":         python(v, false),
		}
		for name, doc := range docs {
			t.Run(name+"/"+v[:4], func(t *testing.T) {
				is := is.New(t)
				var before map[string]string
				is.NoErr(json.Unmarshal([]byte(doc), &before))
				is.Equal(before["echo"], v) // the encoder really wrote v
				is.True(s.Contains([]byte(doc)))
				var after map[string]string
				is.NoErr(json.Unmarshal([]byte(s.Scrub(doc)), &after))
				is.Equal(after["echo"], Redacted)
			})
		}
	}
}

// TestScrubEveryBytePercentEncoded: %XX for every byte, either hex case.
func TestScrubEveryBytePercentEncoded(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	s := NewScrubber()
	s.Register([]byte(canary))
	var upper strings.Builder
	for _, c := range []byte(canary) {
		fmt.Fprintf(&upper, "%%%02X", c)
	}
	for _, form := range []string{upper.String(), strings.ToLower(upper.String())} {
		is.Equal(s.Scrub("q="+form+"&x=1"), "q="+Redacted+"&x=1")
		dec, err := url.QueryUnescape(s.Scrub(form))
		is.NoErr(err)
		is.True(!strings.Contains(dec, canary))
	}
	is.Equal(s.Scrub("no secret %41%42"), "no secret %41%42") // other text untouched
}
