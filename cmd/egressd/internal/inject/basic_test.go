package inject

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/wire"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestParseBasic: only `Basic` (any case), spaces and canonical padded
// standard base64 of a text with a ':' is a Basic credential; the split is
// at the first ':', so a password may hold more.
func TestParseBasic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want Basic
		ok   bool
	}{
		{"plain", "Basic " + b64("alice:pw"), Basic{"alice", "pw"}, true},
		{"scheme in any case", "bAsIc " + b64("alice:pw"), Basic{"alice", "pw"}, true},
		{"two spaces", "Basic  " + b64("alice:pw"), Basic{"alice", "pw"}, true},
		{"empty halves", "Basic " + b64(":"), Basic{"", ""}, true},
		{"colon in the password", "Basic " + b64("alice:p:w"), Basic{"alice", "p:w"}, true},
		{"no colon", "Basic " + b64("alice"), Basic{}, false},
		{"no padding", "Basic " + strings.TrimRight(b64("alice:pw"), "="), Basic{}, false},
		{"url-safe alphabet", "Basic " + base64.URLEncoding.EncodeToString([]byte("a?>:pw~~")), Basic{}, false},
		{"line break", "Basic " + b64("alice:pw")[:4] + "\n" + b64("alice:pw")[4:], Basic{}, false},
		{"trailing junk", "Basic " + b64("alice:pw") + " x", Basic{}, false},
		{"non-canonical trailing bits", "Basic YWxpY2U6cHX=", Basic{}, false},
		{"tab after the scheme", "Basic\t" + b64("alice:pw"), Basic{}, false},
		{"other scheme", "Bearer " + b64("alice:pw"), Basic{}, false},
		{"scheme only", "Basic", Basic{}, false},
		{"scheme and space", "Basic ", Basic{}, false},
		{"prefix of the scheme", "Basi " + b64("alice:pw"), Basic{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got, ok := ParseBasic(tc.in)
			is.Equal(ok, tc.ok)
			is.Equal(got, tc.want)
		})
	}
}

// TestAppendBasicForms: the scan's forms of a Basic value hold what any
// lenient decoder would read, so a placeholder hidden by a malformed
// encoding is still seen; a value of another scheme has no form.
func TestAppendBasicForms(t *testing.T) {
	t.Parallel()
	const secret = "alice:hkp_abcdefghijklmnopqrstuvwxyz234567"
	enc := b64(secret)
	for _, tc := range []struct {
		name string
		in   string
		want bool // a form holds secret
	}{
		{"canonical", "Basic " + enc, true},
		{"no padding", "Basic " + strings.TrimRight(enc, "="), true},
		{"url-safe", "Basic " + base64.URLEncoding.EncodeToString([]byte(secret)), true},
		{"junk inside", "Basic " + enc[:8] + "!*" + enc[8:], true},
		{"line breaks", "Basic " + enc[:8] + "\r\n" + enc[8:], true},
		{"tab after the scheme", "basic\t" + enc, true},
		{"leading space", "  Basic " + enc, true},
		{"padding inside", "Basic " + b64("alice:") + b64("hkp_abcdefghijklmnopqrstuvwxyz234567"), true},
		{"a second word", "Basic " + enc + ", Bearer x", true},
		{"other scheme", "Bearer " + enc, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forms, _ := AppendBasicForms(nil, make([]byte, 0, 8), tc.in) // scratch grows past its first array
			got := slices.ContainsFunc(forms, func(f []byte) bool { return strings.Contains(string(f), "hkp_abcdefghijklmnopqrstuvwxyz234567") })
			is.New(t).Equal(got, tc.want)
		})
	}
}

// TestEncodeBasic: the encoding is canonical and parses back.
func TestEncodeBasic(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	v := EncodeBasic([]byte("alice"), []byte("p:w ö"))
	is.Equal(v, "Basic "+b64("alice:p:w ö"))
	b, ok := ParseBasic(v)
	is.True(ok)
	is.Equal(b, Basic{"alice", "p:w ö"})
}

// TestAuthorization: native injection of a Basic half keeps the other
// half the caller sent with an empty target half, or sends it empty; a
// fixed user-id wins; any other Authorization is a conflict.
func TestAuthorization(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header []string
		half   string
		fixed  string
		want   string // "" with conflict
	}{
		{"password, no header", nil, BasicPassword, "", "Basic " + b64(":v")},
		{"password, the caller's user", []string{"Authorization", "Basic " + b64("alice:")}, BasicPassword, "", "Basic " + b64("alice:v")},
		{"password, a fixed user wins", []string{"Authorization", "Basic " + b64("alice:")}, BasicPassword, "bot", "Basic " + b64("bot:v")},
		{"password, fixed user, no header", nil, BasicPassword, "bot", "Basic " + b64("bot:v")},
		{"user, the caller's password", []string{"Authorization", "Basic " + b64(":x-oauth-basic")}, BasicUser, "", "Basic " + b64("v:x-oauth-basic")},
		{"user, no header", nil, BasicUser, "", "Basic " + b64("v:")},
		{"password already sent", []string{"Authorization", "Basic " + b64("alice:pw")}, BasicPassword, "", ""},
		{"user already sent", []string{"Authorization", "Basic " + b64("alice:")}, BasicUser, "", ""},
		{"bearer", []string{"Authorization", "Bearer x"}, BasicPassword, "", ""},
		{"two fields", []string{"Authorization", "Basic " + b64("a:"), "Authorization", "Basic " + b64("b:")}, BasicPassword, "", ""},
		{"malformed", []string{"Authorization", "Basic !!"}, BasicPassword, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			r := rec(t, "https://api.test/", tc.header...)
			err := Authorization(r, tc.half, tc.fixed, []byte("v"))
			if tc.want == "" {
				is.Equal(wire.CodeOf(err), egressdapi.CodeInjectionConflict)
				return
			}
			is.NoErr(err)
			is.Equal(r.Header.Values("Authorization"), []string{tc.want})
		})
	}
}

// FuzzBasic checks the Basic decoders: whatever the header value, neither
// panics; a value ParseBasic accepts re-encodes to itself (up to the
// scheme's case and spaces) and its decoded text is among the lenient
// forms the scan reads; and any pair with a user-id without ':' encodes
// to a value that parses back to it. Seeds live in testdata/fuzz/FuzzBasic.
func FuzzBasic(f *testing.F) {
	f.Add("Basic "+b64("alice:pw"), "alice", "pw")
	f.Add("basic  "+b64(":"), "", "")
	f.Add("Basic "+strings.TrimRight(b64("u:hkp_x"), "="), "u", "hkp_x")
	f.Add("Basic YWxpY2U6cHX=", "a:b", "c")
	f.Fuzz(func(t *testing.T, v, user, pass string) {
		forms, _ := AppendBasicForms(nil, nil, v)
		if b, ok := ParseBasic(v); ok {
			text := b.User + ":" + b.Password
			tok, _ := basicToken(v, false)
			if enc := EncodeBasic([]byte(b.User), []byte(b.Password)); enc != "Basic "+tok {
				t.Fatalf("%q re-encodes to %q", v, enc)
			}
			if !slices.ContainsFunc(forms, func(f []byte) bool { return string(f) == text }) {
				t.Fatalf("%q decodes to %q, which no lenient form %q holds", v, text, forms)
			}
		}
		if strings.IndexByte(user, ':') >= 0 {
			return
		}
		b, ok := ParseBasic(EncodeBasic([]byte(user), []byte(pass)))
		if !ok || b.User != user || b.Password != pass {
			t.Fatalf("(%q, %q) does not round-trip: %q %v", user, pass, b, ok)
		}
	})
}
