package secretdapi

// Error codes secretd returns in addition to lib/wire's (append-only; each
// listed in docs/protocol.md, "Error codes", and docs/secretd.md).
const (
	CodeCredentialInvalid      = "credential.invalid"            // bad name, empty or oversize value, bad destination or target
	CodeCredentialNotFound     = "credential.not_found"          // no credential by that name
	CodeCredentialReadOnly     = "credential.read_only"          // imported from $CREDENTIALS_DIRECTORY: cannot be changed over the socket
	CodeInvocationInvalid      = "invocation.invalid"            // not [a-z0-9-]{1,64}
	CodeLeaseAmbiguous         = "lease.ambiguous"               // destination or target omitted but the credential allows several
	CodeLeaseConsumed          = "lease.consumed"                // the handle was already consumed
	CodeLeaseDestinationDenied = "lease.destination_not_allowed" // the stage's destination is not among the credential's
	CodeLeaseDuplicate         = "lease.duplicate_handle"        // the same handle twice in one batch
	CodeLeaseExpired           = "lease.expired"                 // the lease's TTL passed (monotonic clock) before it was consumed
	CodeLeaseInvalidHandle     = "lease.invalid_handle"          // not a handle secretd could have made
	CodeLeaseInvalidTTL        = "lease.invalid_ttl"             // ttl_ms outside MinTTLMS..MaxTTLMS
	CodeLeaseNotFound          = "lease.not_found"               // unknown, revoked or swept
	CodeLeasePlaceholderInUse  = "lease.placeholder_in_use"      // a stage asked for a placeholder another invocation's live lease holds
	CodeLeaseStaleEpoch        = "lease.stale_epoch"             // staged by an earlier secretd process
	CodeLeaseTargetDenied      = "lease.target_not_allowed"      // the stage's target is not among the credential's
	CodeLeaseWrongInvocation   = "lease.wrong_invocation"        // the handle was staged for another invocation
	CodeOwnerInvalid           = "owner.invalid"                 // an owner id that is not [a-z0-9-]{1,64}
)

// Codes lists the codes above, sorted and unique (a test checks).
var Codes = []string{
	CodeCredentialInvalid,
	CodeCredentialNotFound,
	CodeCredentialReadOnly,
	CodeInvocationInvalid,
	CodeLeaseAmbiguous,
	CodeLeaseConsumed,
	CodeLeaseDestinationDenied,
	CodeLeaseDuplicate,
	CodeLeaseExpired,
	CodeLeaseInvalidHandle,
	CodeLeaseInvalidTTL,
	CodeLeaseNotFound,
	CodeLeasePlaceholderInUse,
	CodeLeaseStaleEpoch,
	CodeLeaseTargetDenied,
	CodeLeaseWrongInvocation,
	CodeOwnerInvalid,
}
