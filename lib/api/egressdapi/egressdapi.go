// Package egressdapi is egressd's wire API (DESIGN.md, "Main-flow schemas";
// issue 4): op names, roles, request and response bodies, error codes and a
// typed client. Struct fields are declared in bytewise order of their
// msgpack keys, as the canonical encoding requires (wire.CheckSchema tests
// it).
package egressdapi

import "hostkit.dev/lib/rpc"

// Op names.
const (
	OpBundleRegister = "bundle.register"
	OpBundleDrop     = "bundle.drop"
	OpEgressInfo     = "egress.info"
	OpEgressRequest  = "egress.request"
	OpEgressStats    = "egress.stats"
)

// Roles (DESIGN.md's role table).
const (
	RoleAdmin  rpc.Role = "admin"
	RoleClient rpc.Role = "client"
	RoleStager rpc.Role = "stager"
)

// Limits on bundle.register.
const (
	// MaxHandles is the most handles one bundle may consume.
	MaxHandles = 64
	// MaxAllowRules is the most policy rules one bundle may carry.
	MaxAllowRules = 256
	// ProxyTokenLen is the length of a proxy token: 43 characters of
	// unpadded base64url (32 random bytes).
	ProxyTokenLen = 43
)

// AllowRule lets an invocation reach Origin, a canonical origin or an
// origin pattern (lib/netguard), with the listed upper-case Methods; no
// Methods means every method.
type AllowRule struct {
	Methods []string `msgpack:"methods"`
	Origin  string   `msgpack:"origin"`
}

// Policy is an invocation's egress policy. Credential destinations are
// allowed implicitly; everything else must match a rule.
type Policy struct {
	Allow []AllowRule `msgpack:"allow"`
}

// BundleRegisterRequest registers an invocation (stager). Handles (possibly
// none, at most MaxHandles) are consumed from secretd all or nothing; the
// consume answer is the only description of each credential. ProxyToken is
// ProxyTokenLen characters of base64url without padding.
type BundleRegisterRequest struct {
	Handles    [][]byte `msgpack:"handles"`
	Invocation string   `msgpack:"invocation"` // [a-z0-9-]{1,64}
	Policy     Policy   `msgpack:"policy"`
	ProxyToken string   `msgpack:"proxy_token"`
}

// BundleRegisterResponse carries egressd's epoch: a bundle lives only as
// long as this epoch.
type BundleRegisterResponse struct {
	Epoch string `msgpack:"epoch"`
}

// BundleDropRequest drops an invocation's bundle; its values are zeroed.
type BundleDropRequest struct {
	Invocation string `msgpack:"invocation"`
}

// BundleDropResponse is empty.
type BundleDropResponse struct{}

// InfoResponse tells a stager where the proxy face listens and where the
// public CA bundle is.
type InfoResponse struct {
	CABundlePath string `msgpack:"ca_bundle_path"` // <public>/egressd-ca.pem
	Epoch        string `msgpack:"epoch"`
	ProxyAddress string `msgpack:"proxy_address"` // host:port, default 127.0.0.1:4750
	ProxySocket  string `msgpack:"proxy_socket"`  // <run>/egressd/proxy.sock
}

// Header is one HTTP header field; order and repeats are kept.
type Header struct {
	Name  string `msgpack:"name"`
	Value string `msgpack:"value"`
}

// RequestRequest asks egressd to send one HTTP request for a registered
// invocation (client). URL is absolute (https, or http to a literal
// loopback host); Headers must not carry a format for credentials: egressd
// injects them at their staged targets itself.
type RequestRequest struct {
	Body       []byte   `msgpack:"body"`
	Headers    []Header `msgpack:"headers"`
	Invocation string   `msgpack:"invocation"`
	Method     string   `msgpack:"method"`
	URL        string   `msgpack:"url"`
}

// RequestResponse is the upstream's answer after sanitization: hop-by-hop
// and sensitive headers stripped, echoes of credential values scrubbed, the
// body bounded by egressd's response cap. Redirects are returned, never
// followed.
type RequestResponse struct {
	Body    []byte   `msgpack:"body"`
	Headers []Header `msgpack:"headers"`
	Status  int      `msgpack:"status"`
}

// StatsRequest asks for accounting; Invocation "" means every bundle.
type StatsRequest struct {
	Invocation string `msgpack:"invocation"`
}

// InvocationStats is one bundle's accounting.
type InvocationStats struct {
	Invocation string `msgpack:"invocation"`
	// NetworkEgressBytes counts outbound request bytes only (request line,
	// headers and body as sent), never response bytes.
	NetworkEgressBytes uint64 `msgpack:"network_egress_bytes"`
	Refused            uint64 `msgpack:"refused"`  // requests refused
	Requests           uint64 `msgpack:"requests"` // requests sent upstream
}

// StatsResponse lists bundles sorted by invocation.
type StatsResponse struct {
	Invocations []InvocationStats `msgpack:"invocations"`
}
