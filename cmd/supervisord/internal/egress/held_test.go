package egress

import (
	"strings"
	"testing"

	"github.com/matryer/is"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

const (
	heldInv = "0b7c1e52-9a6f-4d3e-8c21-5f4a3b2c1d0e"
	heldTok = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdE"
	heldPh  = "hkp_abcdefghijklmnopqrstuvwxyz234567"
	heldPh2 = "hkp_77777777777777777777777777777777"
)

var heldCreds = []api.CredentialSpec{{Credential: "api", Env: "API_TOKEN"}, {Credential: "git", Env: "GIT_PW"}}

// heldEnv is an agent.env as supervisord writes it, with line lines
// replaced or added.
func heldEnv(extra ...string) string {
	env := map[string]string{}
	ProxyEnv(env, Vars{Invocation: heldInv, Token: heldTok, Addr: "127.0.0.1:4750", CABundle: "/pub/egressd-ca.pem", WgetRC: "/pub/supervisord-wgetrc"})
	env["API_TOKEN"], env["GIT_PW"], env["PATH"] = heldPh, heldPh2, "/usr/bin"
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var b strings.Builder
	for k, v := range env {
		if v != "\x00drop" {
			b.WriteString(k + "=" + v + "\n")
		}
	}
	return b.String()
}

// TestParseHeld: the token and placeholders come back from the agent.env
// supervisord writes; anything that is not exactly that is refused, and
// a refusal names the variable, never its value.
func TestParseHeld(t *testing.T) {
	t.Parallel()
	h, err := ParseHeld([]byte(heldEnv()), heldInv, heldCreds)
	is.New(t).NoErr(err)
	is.New(t).Equal(h, Held{Token: heldTok, Placeholders: []string{heldPh, heldPh2}})
	h, err = ParseHeld([]byte(heldEnv()), heldInv, nil) // no credentials: the token only
	is.New(t).NoErr(err)
	is.New(t).Equal(len(h.Placeholders), 0)

	for _, tc := range []struct {
		name string
		env  string
		want string // in the message
	}{
		{"no proxy variable", heldEnv("https_proxy=\x00drop"), "does not set https_proxy"},
		{"a credential variable missing", heldEnv("GIT_PW=\x00drop"), "does not set GIT_PW"},
		{"set twice", heldEnv() + "API_TOKEN=" + heldPh + "\n", "sets API_TOKEN twice"},
		{"another invocation", heldEnv("https_proxy=http://other:" + heldTok + "@127.0.0.1:4750"), "another invocation"},
		{"short token", heldEnv("https_proxy=http://" + heldInv + ":" + heldTok[1:] + "@127.0.0.1:4750"), "proxy token"},
		{"token with a bad character", heldEnv("https_proxy=http://" + heldInv + ":" + heldTok[1:] + "+@127.0.0.1:4750"), "proxy token"},
		{"no userinfo", heldEnv("https_proxy=http://127.0.0.1:4750"), "is not http://"},
		{"https scheme", heldEnv("https_proxy=https://" + heldInv + ":" + heldTok + "@127.0.0.1:4750"), "is not http://"},
		{"not a URL", heldEnv("https_proxy=http://%zz"), "is not http://"},
		{"placeholder malformed", heldEnv("API_TOKEN=hkp_ABC"), "API_TOKEN holds no well-formed placeholder"},
		{"placeholder replaced by a value", heldEnv("GIT_PW=CANARY-held-value-1234567890"), "GIT_PW holds no well-formed"},
		{"too large", strings.Repeat("x", MaxEnvFile+1), "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			_, err := ParseHeld([]byte(tc.env), heldInv, heldCreds)
			is.Equal(wire.CodeOf(err), api.CodeInstanceInvalid)
			is.True(strings.Contains(err.Error(), tc.want)) // the message names what is wrong
			for _, secret := range []string{heldTok, heldPh, heldPh2, "CANARY"} {
				is.True(!strings.Contains(err.Error(), secret)) // never a value
			}
		})
	}
}

// FuzzParseHeld: any agent.env either parses into a well-formed Held that
// the file really holds, or is refused with instance.invalid; it never
// panics.
func FuzzParseHeld(f *testing.F) {
	f.Add([]byte(heldEnv()))
	f.Add([]byte(heldEnv("https_proxy=http://x:y@z")))
	f.Add([]byte("https_proxy=\nAPI_TOKEN=\nGIT_PW=\n"))
	f.Add([]byte("=\n==\n\n\x00"))
	f.Fuzz(func(t *testing.T, env []byte) {
		h, err := ParseHeld(env, heldInv, heldCreds)
		if err != nil {
			if wire.CodeOf(err) != api.CodeInstanceInvalid {
				t.Fatalf("code %s", wire.CodeOf(err))
			}
			return
		}
		if !validToken(h.Token) || len(h.Placeholders) != len(heldCreds) {
			t.Fatalf("accepted %+v", h)
		}
		for i, ph := range h.Placeholders {
			if !strings.Contains(string(env), heldCreds[i].Env+"="+ph) {
				t.Fatalf("placeholder %d is not in the file", i)
			}
		}
	})
}
