package redact

import (
	"encoding/base64"
	"fmt"
	"html"
	"mime/quotedprintable"
	"net/url"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestContainsDecoded: echoes in forms Scrub does not list, as encoders
// in the wild write them, are found once the escapes are undone; text
// with escapes but no held value, and text without escapes, are not.
func TestContainsDecoded(t *testing.T) {
	t.Parallel()
	const v = `sk/CAN4RY+&<q>"j\zz'op==`
	s := NewScrubber()
	s.Register([]byte(v))
	every := func(upper bool) string {
		var b strings.Builder
		for _, r := range v {
			f := `\u%04x`
			if upper {
				f = `\u%04X`
			}
			fmt.Fprintf(&b, f, r)
		}
		return b.String()
	}
	dotnet := strings.NewReplacer(`+`, `\u002B`, `&`, `\u0026`, `<`, `\u003C`, `>`, `\u003E`, `"`, `\u0022`, `\`, `\\`, `'`, `\u0027`).Replace(v)
	gson := strings.NewReplacer(`&`, `\u0026`, `<`, `\u003c`, `>`, `\u003e`, `"`, `\"`, `\`, `\\`, `'`, `\u0027`, `=`, `\u003d`).Replace(v)
	nested := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(`{"inner":"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"}`)
	tests := []struct {
		name, text string
		want       bool
	}{
		{".NET System.Text.Json", `{"k":"` + dotnet + `"}`, true},
		{"Gson", `{"k":"` + gson + `"}`, true},
		{"every rune \\u, lower", every(false), true},
		{"every rune \\u, upper", every(true), true},
		{"JSON in a JSON string", `{"outer":"` + nested + `"}`, true},
		{"html.EscapeString", "<p>" + html.EscapeString(v) + "</p>", true},
		{"numeric references", strings.NewReplacer("+", "&#43;", "&", "&#x26;", `"`, "&#34;").Replace(v), true},
		{"partial percent (url.PathEscape then one more)", strings.ReplaceAll(url.PathEscape(v), "/", "%2F"), true},
		{"form encoding (Java URLEncoder)", formEncode(v), true},
		{"quoted-printable, soft break inside", "text " + qpBreak(v, 5), true},
		{"base64 wrapped inside the value", wrap(base64.StdEncoding.EncodeToString([]byte("prefix: "+v)), 12), true},
		{"\\x escapes", strings.NewReplacer("/", `\x2f`, "+", `\x2b`, "&", `\x26`).Replace(v), true},
		{"HTML5 names", strings.NewReplacer("/", "&sol;", "+", "&plus;", `\`, "&bsol;", "&", "&amp;", `"`, "&quot;").Replace(v), true},
		{"raw value broken over lines", v[:7] + "\r\n" + v[7:], true},
		{"escapes, no value", `{"k":"\u0041\u0042 &amp; 100%25 \"q\""}`, false},
		{"no escapes at all", "plain text with sk/CAN4RY", false},
		{"broken escapes", `\u12 &#xZZ; %G1 \q &unknown; =ZZ \x1`, false},
		{"form text without the value", "a+b=c%2Bd&e=%7E", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(s.ContainsDecoded([]byte(tt.text)), tt.want)
		})
	}
	is.New(t).True(!NewScrubber().ContainsDecoded([]byte(every(false)))) // nothing registered
}

// TestUnescape: one level undone, incomplete escapes kept.
func TestUnescape(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	for in, want := range map[string]string{
		`a\u0041\u00e9\uD834\uDD1E\n\/`: "aAé\U0001D11E\n/",
		`&amp;&#65;`:                    `&amp;&#65;`, // left to html.UnescapeString
		`\x2f\x2B\xZ1`:                  `/+\xZ1`,
		"a=3Db=\r\nc=\nd=":              "a=bcd=",
		`%41%4a%4A%`:                    "AJJ%",
		`\uD834x`:                       "\uFFFDx",
		`\\u0041`:                       `\u0041`, // one level: the escaped backslash
	} {
		is.Equal(string(unescape([]byte(in))), want) // in
	}
}

// FuzzUnescape: unescape never grows its input and never panics, and
// ContainsDecoded agrees with a direct Contains on what one round gives.
func FuzzUnescape(f *testing.F) {
	for _, seed := range []string{`\u0041`, `\uD834\uDD1E`, `&#x26;`, `%41`, `\`, `&`, `%`, `\u`, `&#`, `%4`} {
		f.Add([]byte(seed))
	}
	s := NewScrubber()
	s.Register([]byte("canary-value-42"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := unescape(b)
		if len(d) > len(b) {
			t.Fatalf("unescape grew %q to %q", b, d)
		}
		if s.Contains(d) && len(d) < len(b) && !s.ContainsDecoded(b) {
			t.Fatalf("ContainsDecoded missed %q (one round gives %q)", b, d)
		}
	})
}

// formEncode is application/x-www-form-urlencoded as Java's URLEncoder and
// the WHATWG URL standard write it: space as '+', '~' and '*' escaped.
func formEncode(v string) string {
	var b strings.Builder
	for _, c := range []byte(v) {
		switch {
		case c == ' ':
			b.WriteByte('+')
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// qpBreak is v as quoted-printable (mime/quotedprintable) with a soft line
// break after its first n bytes.
func qpBreak(v string, n int) string {
	enc := func(s string) string {
		var b strings.Builder
		w := quotedprintable.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.String()
	}
	return enc(v[:n]) + "=\r\n" + enc(v[n:])
}

// wrap breaks s with CRLF every n characters, as MIME and PEM do.
func wrap(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s); i += n {
		b.WriteString(s[i:min(len(s), i+n)] + "\r\n")
	}
	return b.String()
}
