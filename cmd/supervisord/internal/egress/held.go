package egress

import (
	"bytes"
	"net/url"

	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// MaxEnvFile bounds the agent.env ParseHeld reads, in bytes: far more than
// supervisord writes (the request's env is bounded by the frame size).
const MaxEnvFile = 8 << 20

// Held is what a running agent holds of its bundle: the proxy token and
// one placeholder per requested credential. agent.env is their only
// durable copy (supervisord keeps no secret in metadata.json), and the
// agent uses exactly these, so a re-registration must reuse them.
type Held struct {
	Token        string   // egressdapi.ProxyTokenLen characters of base64url
	Placeholders []string // one per credential, in request order; each secretdapi.ValidPlaceholder
}

// ParseHeld reads Held from env, the bytes of invocation's agent.env
// (KEY=VALUE lines, store.EncodeEnv): the token from `https_proxy`
// (http://<invocation>:<token>@<address>, as ProxyEnv writes it) and the
// placeholder from each credential's variable. Errors (instance.invalid,
// naming the variable, never its value): the file is too large, a
// variable is missing or given twice, the proxy URL names another
// invocation or holds a malformed token, a placeholder is malformed.
func ParseHeld(env []byte, invocation string, creds []api.CredentialSpec) (Held, error) {
	if len(env) > MaxEnvFile {
		return Held{}, wire.Errorf(api.CodeInstanceInvalid, "agent.env is larger than %d bytes", MaxEnvFile)
	}
	want := map[string]string{"https_proxy": ""}
	for _, c := range creds {
		want[c.Env] = ""
	}
	seen := map[string]bool{}
	for line := range bytes.SplitSeq(env, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok {
			continue
		}
		if _, wanted := want[string(k)]; !wanted {
			continue
		}
		if seen[string(k)] {
			return Held{}, wire.Errorf(api.CodeInstanceInvalid, "agent.env sets %s twice", k)
		}
		seen[string(k)] = true
		want[string(k)] = string(v)
	}
	for k := range want {
		if !seen[k] {
			return Held{}, wire.Errorf(api.CodeInstanceInvalid, "agent.env does not set %s", k)
		}
	}
	u, err := url.Parse(want["https_proxy"])
	if err != nil || u.Scheme != "http" || u.User == nil {
		return Held{}, wire.Errorf(api.CodeInstanceInvalid, "agent.env's https_proxy is not http://<invocation>:<token>@<address>")
	}
	tok, _ := u.User.Password()
	if u.User.Username() != invocation {
		return Held{}, wire.Errorf(api.CodeInstanceInvalid, "agent.env's https_proxy names another invocation")
	}
	if !validToken(tok) {
		return Held{}, wire.Errorf(api.CodeInstanceInvalid, "agent.env's https_proxy holds no well-formed proxy token")
	}
	h := Held{Token: tok, Placeholders: make([]string, 0, len(creds))}
	for _, c := range creds {
		ph := want[c.Env]
		if !secretdapi.ValidPlaceholder(ph) {
			return Held{}, wire.Errorf(api.CodeInstanceInvalid, "agent.env's %s holds no well-formed placeholder", c.Env)
		}
		h.Placeholders = append(h.Placeholders, ph)
	}
	return h, nil
}

// validToken reports whether s is a proxy token: egressdapi.ProxyTokenLen
// characters of unpadded base64url.
func validToken(s string) bool {
	if len(s) != egressdapi.ProxyTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
