package egress

import (
	"slices"
	"strings"

	api "hostkit.dev/lib/api/supervisordapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/wire"
)

// ProxyVars are the proxy variables an agent gets, all with the same
// value: http://<invocation>:<token>@<proxy address>. curl, wget, git,
// Python (requests, urllib, httpx, aiohttp with trust_env, pip) read the
// lower-case ones, some tools only the upper-case ones.
var ProxyVars = []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"}

// CAVars are the CA bundle variables an agent gets, each the path of the
// bundle egressd writes (the system roots and egressd's CA), one per
// convention real tools read (docs/clients.md): OpenSSL and Go
// (SSL_CERT_FILE), curl, Python requests, Node (added to its roots), git,
// pip, the AWS SDKs and CLI, cargo, npm, Deno.
var CAVars = []string{
	"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
	"GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO", "npm_config_cafile", "DENO_CERT",
}

// NoProxyVars are the variables naming where the proxy is not used.
var NoProxyVars = []string{"NO_PROXY", "no_proxy"}

// IsolatedNoProxy is NO_PROXY in network isolated: the namespace's own
// loopback, so that an agent reaches its own dev servers directly (its
// loopback is its own; the host's is not reachable from it). A host
// instance's is empty: its loopback is the host's, and everything goes
// through egressd's policy.
const IsolatedNoProxy = "localhost,127.0.0.1,::1"

// Vars are what ProxyEnv sets for one instance.
type Vars struct {
	Invocation string // the instance id: the proxy URL's user
	Token      string // the proxy token: the proxy URL's password (agent.env only, never another file)
	Addr       string // the proxy address (host:port) the agent dials
	CABundle   string // egressd's CA bundle path (system roots + its CA)
	WgetRC     string // the shared wgetrc (ca_certificate only); "" = none
	Isolated   bool   // network isolated: NO_PROXY is the namespace's loopback
}

// ProxyEnv sets the variables of docs/design.md, "A credentialed agent run",
// step 5, in env (docs/clients.md has each one): the four proxy variables,
// NO_PROXY and no_proxy (IsolatedNoProxy when isolated, else empty),
// NODE_USE_ENV_PROXY=1, the CA variables and WGETRC.
func ProxyEnv(env map[string]string, v Vars) {
	p := "http://" + v.Invocation + ":" + v.Token + "@" + v.Addr
	for _, k := range ProxyVars {
		env[k] = p
	}
	np := ""
	if v.Isolated {
		np = IsolatedNoProxy
	}
	for _, k := range NoProxyVars {
		env[k] = np
	}
	env["NODE_USE_ENV_PROXY"] = "1"
	for _, k := range CAVars {
		env[k] = v.CABundle
	}
	if v.WgetRC != "" {
		env["WGETRC"] = v.WgetRC
	}
}

// reserved reports whether k is a variable egress sets itself.
func reserved(k string) bool {
	switch k {
	case "NODE_USE_ENV_PROXY", "WGETRC":
		return true
	}
	for _, v := range slices.Concat(ProxyVars, CAVars, NoProxyVars) {
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

// ValidateIsolated refuses, for network isolated, a credential whose
// requested destination is a literal-loopback origin (lib/netguard's
// IsLiteralLoopback: localhost, 127.0.0.0/8, ::1): the instance's
// loopback is its own, so the placeholder would be substituted for a
// server the agent does not see, the host's. Errors: instance.invalid.
func ValidateIsolated(creds []api.CredentialSpec) error {
	for _, c := range creds {
		if err := loopbackDestination(c.Credential, c.Destination); err != nil {
			return err
		}
	}
	return nil
}

// loopbackDestination is instance.invalid naming credential when
// destination is a literal-loopback origin; "" and origins that do not
// parse pass (secretd judges those).
func loopbackDestination(credential, destination string) error {
	if destination == "" {
		return nil
	}
	o, err := netguard.ParseOrigin(destination)
	if err != nil || !netguard.IsLiteralLoopback(o.Hostname()) {
		return nil
	}
	return wire.Errorf(api.CodeInstanceInvalid, "credentials: %s has destination %s, a literal-loopback origin, which an isolated instance cannot use (its loopback is its own); use network host or another destination", credential, destination)
}
