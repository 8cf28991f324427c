package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html"
	"math/rand/v2"
	"net/url"
	"strings"
)

// streamForms returns v in every form the scrubber knows, exact and
// decoded, each with a name.
func streamForms(v string) map[string]string {
	js := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	f := map[string]string{
		"raw":           v,
		"query":         url.QueryEscape(v),
		"path":          url.PathEscape(v),
		"percent all":   percentAll(v),
		"percent lower": strings.ToLower(percentAll(v)),
		"percent some":  percentSome(v),
		"hex":           hex.EncodeToString([]byte(v)),
		"HEX":           strings.ToUpper(hex.EncodeToString([]byte(v))),
		"json":          js(v),
		"json twice":    js(`{"k":"` + js(v) + `"}`),
		"html":          html.EscapeString(v),
		"sep hex :":     sepHex(v, ":", false, 0, ""),
		"sep hex space": sepHex(v, " ", true, 0, ""),
		"sep hex ' - '": sepHex(v, " - ", false, 0, ""),
		"invisible":     interleave(v, "\u200b", 0, ""),
		"invisible 2":   interleave(v, "\u200b\u00ad", 0, ""),
		"wrapped":       v[:len(v)/2] + "\r\n" + v[len(v)/2:],
		"form":          formEncode(v),
		"qp soft":       qpBreak(v, len(v)/3),
		"numeric refs":  numericRefs(v),
		"\\u every":     uEvery(v),
		"\\x some":      strings.NewReplacer("-", `\x2d`, "_", `\x5f`).Replace(v),
	}
	for lv := 1; lv <= 4; lv++ {
		n := string(rune('0' + lv))
		f["percent x"+n] = levels(percentSome(v), lv-1, url.QueryEscape)
		f["json x"+n] = levels(v, lv, js)
		f["html x"+n] = levels(numericRefs(v), lv-1, html.EscapeString)
		f["mixed x"+n] = levels(uEvery(v), lv-1, func(s string) string { return js(url.QueryEscape(s)) })
	}
	for k := range 3 {
		pre := strings.Repeat("k", k)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			e := enc.EncodeToString([]byte(pre + v + "tail"))
			f["base64 "+string(rune('0'+k))+enc.EncodeToString([]byte{0xfb, 0xff})] = e
			if k == 1 {
				f["base64 wrapped"+enc.EncodeToString([]byte{0xfb})] = wrap(e, 10)
			}
		}
	}
	return f
}

func numericRefs(v string) string {
	var b strings.Builder
	for i, r := range v {
		if i%2 == 0 {
			b.WriteString("&#" + itoa(int(r)) + ";")
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for n > 0 {
		d = append([]byte{byte('0' + n%10)}, d...)
		n /= 10
	}
	return string(d)
}

func uEvery(v string) string {
	var b strings.Builder
	for _, r := range v {
		const digits = "0123456789ABCDEF"
		b.WriteString(`\u`)
		for sh := 12; sh >= 0; sh -= 4 {
			b.WriteByte(digits[(r>>sh)&0xf])
		}
	}
	return b.String()
}

// streamNoise is text around the forms: bytes that start escapes, break
// lines, look like hex, or overlap the marker.
var streamNoise = []string{
	"a", "b", "Z", "0", "9", "f", "E", " ", ":", "-", ".", "\\", "\\u", "\\uD834", "%", "%2", "%25", "=", "=\r", "=\r\n",
	"+", "&", "&#", "&#x", "&amp", "&amp;", "&lt", "&#0", "&#12345678;", "\r", "\n", "\r\n\r\n", "\u200b", "\u00ad",
	"\xe2", "\xe2\x80", "[REDACTED]", "D]", "[RE", "data: ", "\"", "{", "}", "é", "\u200b\u200b\u200b",
}

// streamText builds a random text of held-value forms and noise.
func streamText(rng *rand.Rand, forms []string, n int) string {
	var b strings.Builder
	for range n {
		if rng.IntN(4) == 0 && len(forms) > 0 {
			f := forms[rng.IntN(len(forms))]
			if rng.IntN(4) == 0 { // a form cut short
				f = f[:rng.IntN(len(f)+1)]
			}
			b.WriteString(f)
			continue
		}
		b.WriteString(streamNoise[rng.IntN(len(streamNoise))])
	}
	return b.String()
}

// randomCuts returns k ascending cut offsets in [0, n].
func randomCuts(rng *rand.Rand, n, k int) []int {
	cuts := make([]int, k)
	for i := range cuts {
		cuts[i] = rng.IntN(n + 1)
	}
	for i := 1; i < len(cuts); i++ {
		for j := i; j > 0 && cuts[j] < cuts[j-1]; j-- {
			cuts[j], cuts[j-1] = cuts[j-1], cuts[j]
		}
	}
	return cuts
}

// everyByte cuts a text of n bytes into 1-byte pieces.
func everyByte(n int) []int {
	cuts := make([]int, n)
	for i := range cuts {
		cuts[i] = i
	}
	return cuts
}
