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
	OpBundleList     = "bundle.list"
	OpEgressInfo     = "egress.info"
	OpEgressRequest  = "egress.request"
	// OpEgressRequestStream is egress.request with the answer streamed:
	// the same request body, an accepting answer with the status and
	// headers (RequestStreamResponse), then the body in data frames as
	// it arrives, the trailers, and eof (docs/egressd.md, "Ops").
	OpEgressRequestStream = "egress.request_stream"
	// OpEgressRequestUpload is egress.request_stream with the request
	// body streamed too: the request carries no body, and the caller
	// sends it right after the request in data frames of 1 to
	// StreamDataMax bytes, then eof, while egressd sends it upstream as
	// it arrives; the answer is egress.request_stream's
	// (docs/egressd.md, "Ops").
	OpEgressRequestUpload = "egress.request_upload"
	OpEgressStats         = "egress.stats"
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
// ProxyTokenLen characters of base64url without padding. A register never
// replaces a bundle: an invocation that has one, whoever its owner, is
// bundle.exists and the existing bundle is left as it is.
type BundleRegisterRequest struct {
	Handles    [][]byte `msgpack:"handles"`
	Invocation string   `msgpack:"invocation"` // [a-z0-9-]{1,64}
	// Owner is the registering process's persistent owner id
	// ([a-z0-9-]{1,64}, secretdapi.ValidOwner; "" = none, as before the
	// field existed; else bundle.invalid). egressd records it: bundle.list
	// selects by it and bundle.drop can require it, so a stager that
	// restarts after a crash drops exactly its own bundles. It is
	// bookkeeping, not an access check.
	Owner      string `msgpack:"owner"`
	Policy     Policy `msgpack:"policy"`
	ProxyToken string `msgpack:"proxy_token"`
}

// BundleRegisterResponse carries egressd's epoch: a bundle lives only as
// long as this epoch.
type BundleRegisterResponse struct {
	Epoch string `msgpack:"epoch"`
}

// BundleDropRequest drops an invocation's bundle; its values are zeroed.
// With Owner set, the bundle is dropped only when it was registered with
// that owner id: another owner's bundle (or one registered without an
// owner) is bundle.owner_mismatch and stays. Errors: bundle.invalid (a
// malformed owner), bundle.unknown_invocation, bundle.owner_mismatch.
type BundleDropRequest struct {
	Invocation string `msgpack:"invocation"`
	Owner      string `msgpack:"owner"` // "" = whatever the owner
}

// BundleListRequest lists bundles (stager), of one invocation and of one
// owner id when set ("" = any). Errors: bundle.invalid (a malformed
// invocation or owner).
type BundleListRequest struct {
	Invocation string `msgpack:"invocation"`
	Owner      string `msgpack:"owner"`
}

// BundleInfo describes one bundle: never a handle, a proxy token, a
// placeholder or a value (a stager that lost its records learns what it
// left, not what it could use).
type BundleInfo struct {
	Credentialed bool   `msgpack:"credentialed"` // the bundle holds at least one credential
	Epoch        string `msgpack:"epoch"`        // egressd's epoch: the bundle lives as long as it
	Invocation   string `msgpack:"invocation"`
	Owner        string `msgpack:"owner"`         // "" when registered without one
	RegisteredAt int64  `msgpack:"registered_at"` // Unix ms
}

// BundleListResponse lists bundles sorted by invocation.
type BundleListResponse struct {
	Bundles []BundleInfo `msgpack:"bundles"`
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

// StreamDataMax is the most body bytes one data frame of an
// egress.request_stream answer carries: 64 KiB. A frame carries what the
// pipeline released at once, so a small event is never held back to fill
// one.
const StreamDataMax = 64 << 10

// RequestStreamResponse accepts an egress.request_stream (whose request
// is a RequestRequest): the upstream's status and sanitized headers, as in
// RequestResponse, without Content-Length (the body's length changes when
// a held value is scrubbed out of it) or the framing headers. The body
// follows in stream frames (docs/protocol.md, "Stream frames"): data
// frames of 1 to StreamDataMax bytes, at most one trailers frame, then
// eof; or an error frame when egressd cut the answer off
// (egress.response_aborted, egress.response_too_large, egress.timeout,
// egress.upstream_error, egress.response_undecodable) or stopped
// (server.shutting_down).
type RequestStreamResponse struct {
	Headers []Header `msgpack:"headers"` // sorted by name; repeats kept in order
	Status  int      `msgpack:"status"`  // the upstream's status code, 100-999
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
	// NetworkIngressBytes counts response body bytes passed on to the
	// client (after scrubbing), as they pass: an open stream's bytes
	// count before it ends.
	NetworkIngressBytes uint64 `msgpack:"network_ingress_bytes"`
	Refused             uint64 `msgpack:"refused"`  // requests refused
	Requests            uint64 `msgpack:"requests"` // requests sent upstream
}

// StatsResponse lists bundles sorted by invocation.
type StatsResponse struct {
	Invocations []InvocationStats `msgpack:"invocations"`
}
