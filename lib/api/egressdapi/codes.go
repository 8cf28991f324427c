package egressdapi

// Error codes egressd returns in addition to lib/wire's (append-only; each
// listed in docs/protocol.md and docs/egressd.md).
const (
	CodeBundleConsumeFailed  = "bundle.consume_failed"             // secretd refused the consume, or answered something unusable; nothing is kept
	CodeBundleExists         = "bundle.exists"                     // the invocation already has a bundle: drop it first
	CodeBundleInvalid        = "bundle.invalid"                    // bad invocation id, owner, token, policy or handles
	CodeBundleOwnerMismatch  = "bundle.owner_mismatch"             // bundle.drop named an owner the bundle does not carry: nothing was dropped
	CodeBundleUnknown        = "bundle.unknown_invocation"         // no bundle for that invocation
	CodeAddressForbidden     = "egress.address_forbidden"          // the host resolves to (or is) a non-public address the operator did not map
	CodeClientClosed         = "egress.client_closed"              // the client went away before the answer's end: the upstream request was ended (audit only)
	CodeHeaderInvalid        = "egress.header_invalid"             // CR, LF, NUL or CTL in a header, a bad name, Host mismatch, CL+TE
	CodeInjectionConflict    = "egress.injection_conflict"         // the staged target is already present (header without overwrite, query param, a non-Basic Authorization), or two Basic placements disagree on the user-id
	CodeInjectionFailed      = "egress.injection_failed"           // the staged target cannot be filled (bad JSON body, duplicate keys, missing parent)
	CodeInvalidRequest       = "egress.invalid_request"            // malformed method or URL, userinfo, fragment, bad body length
	CodeLoopbackOwnerAgent   = "egress.loopback_owner_agent"       // the loopback listener that would receive a credential is owned by an agent UID (-agent-uids)
	CodeLoopbackOwnerUnknown = "egress.loopback_owner_unverified"  // the owner of a loopback listener could not be checked
	CodeManualCredential     = "egress.manual_credential_rejected" // the caller sent a raw credential value egressd holds
	CodeMethodForbidden      = "egress.method_forbidden"           // TRACE, TRACK, CONNECT
	CodePlaceholderMisuse    = "egress.placeholder_misuse"         // a known placeholder outside its staged target, destination or invocation, or over plaintext
	CodePlaintextCredential  = "egress.plaintext_credential"       // a credential would travel over plaintext to a non-loopback host
	CodePolicyDenied         = "egress.policy_denied"              // the origin or method is neither a credential destination nor allowed by the policy
	CodeRawTCPDenied         = "egress.raw_tcp_denied"             // a transparent connection neither TLS nor HTTP, without a tcp:// rule for it or from an invocation holding credentials
	CodeResponseAborted      = "egress.response_aborted"           // a streamed answer was cut off before a held value it holds in a form that cannot be removed in place
	CodeResponseTooLarge     = "egress.response_too_large"         // the response body passed -max-response-body, or 4 MiB in a buffered egress.request answer
	CodeResponseUndecodable  = "egress.response_undecodable"       // a compressed response body that cannot be scanned
	CodeSecretInRequest      = "egress.secret_in_request"          // a held value where no credential is staged: target, header, body or host name
	CodeTimeout              = "egress.timeout"                    // the upstream did not answer in time, or a body stopped arriving for -idle-timeout
	CodeTooLarge             = "egress.too_large"                  // request headers or body over the caps
	CodeTransparentRefused   = "egress.transparent_refused"        // the Hostkit-Transparent header off the Unix proxy socket, or with an unknown value
	// CodeUnavailable answers (503, Retry-After: 1) a proxy request that
	// names an invocation without a bundle during -reregister-grace after
	// egressd started, while stagers re-register the bundles a restart
	// lost; supervisord's isolated-instance bridge answers it too while
	// egressd's proxy socket refuses connections.
	CodeUnavailable   = "egress.unavailable"
	CodeUpstreamError = "egress.upstream_error" // the upstream connection or TLS verification failed, or its answer held a value in a form that cannot be scrubbed
)

// Codes lists the codes above, sorted and unique (a test checks).
var Codes = []string{
	CodeBundleConsumeFailed,
	CodeBundleExists,
	CodeBundleInvalid,
	CodeBundleOwnerMismatch,
	CodeBundleUnknown,
	CodeAddressForbidden,
	CodeClientClosed,
	CodeHeaderInvalid,
	CodeInjectionConflict,
	CodeInjectionFailed,
	CodeInvalidRequest,
	CodeLoopbackOwnerAgent,
	CodeLoopbackOwnerUnknown,
	CodeManualCredential,
	CodeMethodForbidden,
	CodePlaceholderMisuse,
	CodePlaintextCredential,
	CodePolicyDenied,
	CodeRawTCPDenied,
	CodeResponseAborted,
	CodeResponseTooLarge,
	CodeResponseUndecodable,
	CodeSecretInRequest,
	CodeTimeout,
	CodeTooLarge,
	CodeTransparentRefused,
	CodeUnavailable,
	CodeUpstreamError,
}
