package redact

import (
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
)

func TestCodesSortedUnique(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	is.True(slices.IsSorted(Codes))
	is.Equal(len(slices.Compact(slices.Clone(Codes))), len(Codes))
}

func TestIsSensitiveKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		want bool
	}{
		{"token", "token", true},
		{"access token", "access_token", true},
		{"upper", "PASSWORD", true},
		{"passwd", "db_passwd", true},
		{"secret", "clientSecret", true},
		{"credential", "Credentials", true},
		{"authorization", "Authorization", true},
		{"api key", "X-Api-Key", true},
		{"apikey", "apikey", true},
		{"cookie", "Set-Cookie", true},
		{"private", "private_pem", true},
		{"fingerprint", "token_fp", false},
		{"fingerprint upper", "HANDLE_FP", false},
		{"plain", "user", false},
		{"op", "op", false},
		{"empty", "", false},
		{"instance", "instance_id", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			is.Equal(IsSensitiveKey(tt.key), tt.want)
		})
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	const ph = "hkp_abcdefghijklmnopqrstuvwxyz234567"
	tests := []struct {
		name, in, want string
	}{
		{"kv", "password=hunter2", "password=[REDACTED]"},
		{"kv in text", "login failed password=hunter2 user=bob", "login failed password=[REDACTED] user=bob"},
		{"colon", "token: abc123", "token: [REDACTED]"},
		{"spaces around", "secret = s3cr3t!", "secret = [REDACTED]"},
		{"json", `{"password":"a b c","user":"bob"}`, `{"password":"[REDACTED]","user":"bob"}`},
		{"json spaced", `{"api_key": "x\"y"}`, `{"api_key": "[REDACTED]"}`},
		{"single quoted", `auth='p w'`, `auth='[REDACTED]'`},
		{"query", "GET /x?access_token=x&a=1", "GET /x?access_token=[REDACTED]&a=1"},
		{"query last", "https://h/p?a=1&api_key=zzz", "https://h/p?a=1&api_key=[REDACTED]"},
		{"bearer", "Bearer abc.def-ghi", "Bearer [REDACTED]"},
		{"bearer lower", "sent bearer abc", "sent bearer [REDACTED]"},
		{"header bearer", "Authorization: Bearer abc", "Authorization: Bearer [REDACTED]"},
		{"header basic", "Authorization: Basic dXNlcjpwdw==", "Authorization: Basic [REDACTED]"},
		{"header token", "authorization: token ghp_123", "authorization: token [REDACTED]"},
		{"basic prose", "a basic check failed", "a basic check failed"},
		{"basic long", "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ", "Basic [REDACTED]"},
		{"userinfo", "https://user:pw@host/p", "https://[REDACTED]@host/p"},
		{"userinfo user only", "dial http://tok@127.0.0.1:4750", "dial http://[REDACTED]@127.0.0.1:4750"},
		{"userinfo at in pw", "https://u:p@ss@host", "https://[REDACTED]@host"},
		{"url no userinfo", "https://host/a@b", "https://host/a@b"},
		{"cookie", "Cookie: sid=abc; theme=dark", "Cookie: [REDACTED]; theme=dark"},
		{"placeholder kv", "token=" + ph, "token=" + ph},
		{"placeholder bearer", "Authorization: Bearer " + ph, "Authorization: Bearer " + ph},
		{"not placeholder", "token=hkp_short", "token=[REDACTED]"},
		{"fingerprint", "token_fp=ab12", "token_fp=ab12"},
		{"plain", "lease.consume ok invocation=abc", "lease.consume ok invocation=abc"},
		{"func prefix", "secretd.lease: not found", "secretd.lease: not found"},
		{"empty value", "password=", "password="},
		{"already", "password=[REDACTED]", "password=[REDACTED]"},
		{"no text", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			got := String(tt.in)
			is.Equal(got, tt.want)
			is.Equal(String(got), got) // idempotent
		})
	}
}

func TestStringNoAlloc(t *testing.T) {
	is := is.New(t)
	s := "lease.consume ok invocation=abc corr=xyz"
	is.Equal(testing.AllocsPerRun(100, func() { _ = String(s) }), 0.0)
}

// TestPrefilterSkipsOnlyUnchangedText checks the prefilter against the
// full rules on text near each rule's edge: a miss here would let a
// secret through String unredacted.
func TestPrefilterSkipsOnlyUnchangedText(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"http://127.0.0.1:8080", "127.0.0.1:443", "/v1/items", "egress.request", "up.test:443",
		"x-api-KEY: abc", "PassWD=x", "Cookie: a=b", "private:x", "https://u:p@h", "u@h://x",
		"https://h/@x", "AUTH=1", "oauth:2", "bearer x", "BASIC dXNlcjpwdw==", "token_fp=abc",
		"credential = v", "SeCrEt: 'q'", "key=", "=key", "a:b:c", "user@host", "mailto:a@b",
	} {
		is := is.New(t)
		if !mayNeedRedaction(in) {
			is.Equal(redactKeyValues(redactUserinfo(redactAuthSchemes(in))), in) // skipped text must be unchanged
		}
	}
	is := is.New(t)
	is.True(!mayNeedRedaction("http://127.0.0.1:8080")) // origins take the fast path
	is.True(!mayNeedRedaction("127.0.0.1:443"))
	is.True(mayNeedRedaction("x-api-KEY: abc"))
	is.True(mayNeedRedaction("https://u:p@h"))
}

// TestSensitiveFragmentsSwitch checks hasSensitiveFragment against
// sensitiveFragments: each fragment, in any case and anywhere, is found.
func TestSensitiveFragmentsSwitch(t *testing.T) {
	t.Parallel()
	for _, f := range sensitiveFragments {
		is := is.New(t)
		for _, in := range []string{f, strings.ToUpper(f), "x_" + f + "_y", "-" + strings.ToUpper(f[:1]) + f[1:]} {
			is.True(hasSensitiveFragment(in)) // in
		}
		is.True(!hasSensitiveFragment(f[:len(f)-1])) // a fragment cut short
	}
	is := is.New(t)
	is.True(!hasSensitiveFragment("http://127.0.0.1:8080/v1/items"))
}
