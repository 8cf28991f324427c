// Package egressdapi is egressd's wire API (docs/egressd.md, "Ops"): op
// names, roles, request and response bodies, error codes and a typed
// client. Struct fields are declared in bytewise order of their msgpack
// keys, as the canonical encoding requires (wire.CheckSchema tests it).
// Times are int64 Unix milliseconds and a zero field is absent on the wire
// (docs/protocol.md, "Canonical encoding").
package egressdapi

import "hostkit.dev/lib/rpc"

// Op names, with the role each needs and its body and answer
// (docs/egressd.md, "Ops").
const (
	// OpBundleRegister registers an invocation's bundle (stager):
	// BundleRegisterRequest → BundleRegisterResponse.
	OpBundleRegister = "bundle.register"
	// OpBundleDrop drops an invocation's bundle and zeroes its values
	// (stager): BundleDropRequest → BundleDropResponse.
	OpBundleDrop = "bundle.drop"
	// OpBundleList lists bundles, never a secret (stager):
	// BundleListRequest → BundleListResponse.
	OpBundleList = "bundle.list"
	// OpEgressInfo tells where the proxy face listens (stager): empty →
	// InfoResponse.
	OpEgressInfo = "egress.info"
	// OpEgressRequest sends one mediated HTTP request and answers it
	// whole, at most 4 MiB of body (client): RequestRequest →
	// RequestResponse.
	OpEgressRequest = "egress.request"
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
	// OpEgressStats reports per-bundle accounting (admin, stager):
	// StatsRequest → StatsResponse.
	OpEgressStats = "egress.stats"
)

// Roles. Each is a list of users in egressd's flags; a peer in none of
// them is peer.denied (docs/egressd.md, "Ops").
const (
	// RoleAdmin reads accounting, egress.stats (-admin-users).
	RoleAdmin rpc.Role = "admin"
	// RoleClient sends mediated requests, egress.request and its
	// streamed forms (-client-users): local services acting for an
	// invocation.
	RoleClient rpc.Role = "client"
	// RoleStager registers, lists and drops bundles and reads
	// egress.info and egress.stats (-stager-users: supervisord's user).
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
	// Methods are upper-case HTTP method tokens (RFC 9110 §9), e.g.
	// "GET"; empty = every method. A lower-case or non-token entry is
	// bundle.invalid.
	Methods []string `msgpack:"methods"`
	// Origin is an origin matched exactly ("https://api.example.com";
	// https, or http to a literal loopback host), a wildcard pattern
	// ("https://*.example.com[:port]", at least two labels after "*."),
	// or a raw TCP origin "tcp://host:port" that lets a transparent
	// connection that is neither TLS nor HTTP through; the grammar and
	// its codes are netguard.ParsePattern's, reported as bundle.invalid.
	Origin string `msgpack:"origin"`
}

// Policy is an invocation's egress policy. Credential destinations are
// allowed implicitly; everything else must match a rule.
type Policy struct {
	Allow []AllowRule `msgpack:"allow"` // 0 to MaxAllowRules rules; none = credential destinations only
}

// BundleRegisterRequest registers an invocation (stager). Handles (possibly
// none, at most MaxHandles) are consumed from secretd all or nothing; the
// consume answer is the only description of each credential. ProxyToken is
// ProxyTokenLen characters of base64url without padding. A register never
// replaces a bundle: an invocation that has one, whoever its owner, is
// bundle.exists and the existing bundle is left as it is.
type BundleRegisterRequest struct {
	// Handles are lease handles from secretd's lease.stage, consumed in
	// one lease.consume: 0 to MaxHandles, each 1 to
	// secretdapi.MaxHandleLen bytes and none twice (else bundle.invalid);
	// a consume secretd refuses is bundle.consume_failed.
	Handles    [][]byte `msgpack:"handles"`
	Invocation string   `msgpack:"invocation"` // [a-z0-9-]{1,64}; else bundle.invalid
	// Owner is the registering process's persistent owner id
	// ([a-z0-9-]{1,64}, secretdapi.ValidOwner; "" = none, as before the
	// field existed; else bundle.invalid). egressd records it: bundle.list
	// selects by it and bundle.drop can require it, so a stager that
	// restarts after a crash drops exactly its own bundles. It is
	// bookkeeping, not an access check.
	Owner string `msgpack:"owner"`
	// Policy is what the invocation may reach besides its credentials'
	// destinations; at most MaxAllowRules rules (else bundle.invalid).
	Policy Policy `msgpack:"policy"`
	// ProxyToken is the secret a proxy client of this invocation
	// presents to the proxy face (compared in constant time): exactly
	// ProxyTokenLen characters of [A-Za-z0-9_-] (else bundle.invalid).
	ProxyToken string `msgpack:"proxy_token"`
}

// BundleRegisterResponse carries egressd's epoch: a bundle lives only as
// long as this epoch.
type BundleRegisterResponse struct {
	Epoch string `msgpack:"epoch"` // egressd's epoch: 16 lowercase hex, new at every process start
}

// BundleDropRequest drops an invocation's bundle; its values are zeroed.
// With Owner set, the bundle is dropped only when it was registered with
// that owner id: another owner's bundle (or one registered without an
// owner) is bundle.owner_mismatch and stays. Errors: bundle.invalid (a
// malformed owner), bundle.unknown_invocation, bundle.owner_mismatch.
type BundleDropRequest struct {
	Invocation string `msgpack:"invocation"` // the invocation whose bundle goes
	Owner      string `msgpack:"owner"`      // "" = whatever the owner; else [a-z0-9-]{1,64} the bundle must carry
}

// BundleListRequest lists bundles (stager), of one invocation and of one
// owner id when set ("" = any). Errors: bundle.invalid (a malformed
// invocation or owner).
type BundleListRequest struct {
	Invocation string `msgpack:"invocation"` // "" = every invocation; else [a-z0-9-]{1,64}
	Owner      string `msgpack:"owner"`      // "" = every owner; else [a-z0-9-]{1,64}
}

// BundleInfo describes one bundle: never a handle, a proxy token, a
// placeholder or a value (a stager that lost its records learns what it
// left, not what it could use).
type BundleInfo struct {
	Credentialed bool   `msgpack:"credentialed"`  // the bundle holds at least one credential
	Epoch        string `msgpack:"epoch"`         // egressd's epoch: the bundle lives as long as it
	Invocation   string `msgpack:"invocation"`    // the invocation id
	Owner        string `msgpack:"owner"`         // "" when registered without one
	RegisteredAt int64  `msgpack:"registered_at"` // Unix ms
}

// BundleListResponse lists bundles sorted by invocation.
type BundleListResponse struct {
	Bundles []BundleInfo `msgpack:"bundles"` // sorted by Invocation; empty when none match
}

// BundleDropResponse is empty.
type BundleDropResponse struct{}

// InfoResponse tells a stager where the proxy face listens and where the
// public CA bundle is.
type InfoResponse struct {
	CABundlePath string `msgpack:"ca_bundle_path"` // <public>/egressd-ca.pem
	Epoch        string `msgpack:"epoch"`          // egressd's epoch: 16 lowercase hex, new at every process start
	ProxyAddress string `msgpack:"proxy_address"`  // the bound IP:port (-proxy-address, default 127.0.0.1:4750; port 0 reports the one picked)
	ProxySocket  string `msgpack:"proxy_socket"`   // <run>/egressd/proxy.sock
}

// Header is one HTTP header field; order and repeats are kept.
type Header struct {
	Name  string `msgpack:"name"`  // the field name, an RFC 9110 token
	Value string `msgpack:"value"` // the field value; no CR, LF, NUL or other CTL in a request
}

// RequestRequest asks egressd to send one HTTP request for a registered
// invocation (client). URL is absolute (https, or http to a literal
// loopback host); Headers must not carry a format for credentials: egressd
// injects them at their staged targets itself.
type RequestRequest struct {
	// Body is the request body: at most -max-request-body bytes (default
	// 32 MiB; egress.too_large) and what the 8 MiB frame holds. Empty
	// for egress.request_upload, which streams it (else
	// request.invalid).
	Body []byte `msgpack:"body"`
	// Headers are the request's header fields in order: at most 100,
	// and 64 KiB of names and values together (egress.too_large); a bad
	// name or value, a Host that differs from the URL's, or
	// Content-Length with Transfer-Encoding is egress.header_invalid.
	// Hop-by-hop, proxy and X-Hostkit-* fields are dropped.
	Headers []Header `msgpack:"headers"`
	// Invocation names the registered bundle the request goes out for
	// (bundle.unknown_invocation when there is none).
	Invocation string `msgpack:"invocation"`
	// Method is an HTTP method token of at most 32 bytes
	// (egress.invalid_request); TRACE, TRACK and CONNECT are
	// egress.method_forbidden.
	Method string `msgpack:"method"`
	// URL is the absolute target, at most 8 KiB (egress.too_large):
	// https, or http to a literal loopback host; no userinfo or fragment
	// (egress.invalid_request).
	URL string `msgpack:"url"`
}

// RequestResponse is the upstream's answer after sanitization: hop-by-hop
// and sensitive headers stripped, echoes of credential values scrubbed, the
// body bounded by egressd's response cap. Redirects are returned, never
// followed.
type RequestResponse struct {
	Body    []byte   `msgpack:"body"`    // decoded (gzip undone) and scrubbed; at most 4 MiB, else egress.response_too_large
	Headers []Header `msgpack:"headers"` // sanitized header fields, repeats kept in order
	Status  int      `msgpack:"status"`  // the upstream's status code, 100-999
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
	Invocation string `msgpack:"invocation"` // "" = every bundle
}

// InvocationStats is one bundle's accounting.
type InvocationStats struct {
	Invocation string `msgpack:"invocation"` // the bundle's invocation id
	// NetworkEgressBytes counts outbound request bytes only (request line,
	// headers and body as sent), never response bytes.
	NetworkEgressBytes uint64 `msgpack:"network_egress_bytes"`
	// NetworkIngressBytes counts response body bytes passed on to the
	// client (after scrubbing), as they pass: an open stream's bytes
	// count before it ends.
	NetworkIngressBytes uint64 `msgpack:"network_ingress_bytes"`
	Refused             uint64 `msgpack:"refused"`  // requests refused, on the API socket and the proxy face
	Requests            uint64 `msgpack:"requests"` // requests sent upstream, on the API socket and the proxy face
}

// StatsResponse lists bundles sorted by invocation.
type StatsResponse struct {
	// Invocations are the live bundles' counts, sorted by invocation:
	// a dropped bundle's counts go with it.
	Invocations []InvocationStats `msgpack:"invocations"`
}
