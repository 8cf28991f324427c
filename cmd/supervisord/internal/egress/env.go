package egress

import (
	"strings"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/wire"
)

// ProxyVars are the proxy variables an agent gets, all with the same
// value: http://<invocation>:<token>@<proxy address>.
var ProxyVars = []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"}

// CAVars are the CA bundle variables an agent gets: egressd's public CA
// bundle.
var CAVars = []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"}

// ProxyEnv sets DESIGN.md step 5's variables in env: the four proxy
// variables, NO_PROXY and no_proxy empty, NODE_USE_ENV_PROXY=1 and the
// four CA variables.
func ProxyEnv(env map[string]string, invocation, token, addr, caPath string) {
	p := "http://" + invocation + ":" + token + "@" + addr
	for _, k := range ProxyVars {
		env[k] = p
	}
	env["NO_PROXY"], env["no_proxy"] = "", ""
	env["NODE_USE_ENV_PROXY"] = "1"
	for _, k := range CAVars {
		env[k] = caPath
	}
}

// reserved reports whether k is a variable egress sets itself.
func reserved(k string) bool {
	switch k {
	case "NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY":
		return true
	}
	for _, v := range append(append([]string{}, ProxyVars...), CAVars...) {
		if k == v {
			return true
		}
	}
	return strings.HasPrefix(k, "HOSTKIT_")
}

// Validate checks a provision request's credentials: each names a
// credential and a distinct environment variable (a shell name, not one
// egress or hostkit sets). Errors: instance.invalid.
func Validate(creds []api.CredentialSpec) error {
	seen := map[string]bool{}
	for _, c := range creds {
		if c.Credential == "" || strings.ContainsAny(c.Credential, "\x00\n") {
			return wire.Errorf(api.CodeInstanceInvalid, "credentials: each needs a credential name")
		}
		if !envName(c.Env) {
			return wire.Errorf(api.CodeInstanceInvalid, "credentials: env must be a variable name ([A-Za-z_][A-Za-z0-9_]*)")
		}
		if reserved(c.Env) {
			return wire.Errorf(api.CodeInstanceInvalid, "credentials: env %s is set by supervisord itself", c.Env)
		}
		if seen[c.Env] {
			return wire.Errorf(api.CodeInstanceInvalid, "credentials: env %s named twice", c.Env)
		}
		seen[c.Env] = true
	}
	return nil
}

func envName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
