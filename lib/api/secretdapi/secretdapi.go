// Package secretdapi is secretd's wire API (docs/secretd.md, "Ops and
// roles"): op names, roles, request and response bodies, error codes and a
// typed client. Struct fields are declared in bytewise order of their
// msgpack keys, as the canonical encoding requires (wire.CheckSchema tests
// it). Times are int64 Unix milliseconds and a zero field is absent on the
// wire (docs/protocol.md, "Canonical encoding").
package secretdapi

import "hostkit.dev/lib/rpc"

// Op names, with the role each needs and its body and answer
// (docs/secretd.md, "Ops and roles").
const (
	// OpCredentialPut stores or replaces a credential (admin; an optional
	// idempotency key): CredentialPutRequest → CredentialPutResponse.
	OpCredentialPut = "credential.put"
	// OpCredentialDelete deletes a stored credential (admin):
	// CredentialDeleteRequest → empty.
	OpCredentialDelete = "credential.delete"
	// OpCredentialList lists every credential's metadata, never a value
	// (admin): empty → CredentialListResponse.
	OpCredentialList = "credential.list"
	// OpLeaseStage stages a one-shot lease (stager): LeaseStageRequest →
	// LeaseStageResponse.
	OpLeaseStage = "lease.stage"
	// OpLeaseConsume consumes handles, all or nothing, at most 256 per
	// call and never with an idempotency key (consumer):
	// LeaseConsumeRequest → LeaseConsumeResponse.
	OpLeaseConsume = "lease.consume"
	// OpLeaseLookup reads a lease's metadata without consuming it
	// (stager): LeaseLookupRequest → LeaseMeta.
	OpLeaseLookup = "lease.lookup"
	// OpLeaseRevoke revokes an invocation's unconsumed leases and zeroes
	// their values (stager): LeaseRevokeRequest → LeaseRevokeResponse.
	OpLeaseRevoke = "lease.revoke"
	// OpLeaseList lists unexpired staged leases (admin, stager):
	// LeaseListRequest → LeaseListResponse.
	OpLeaseList = "lease.list"
)

// Roles. Each is a list of users in secretd's flags (names or UIDs; empty
// = secretd's own user); a peer in none of them is peer.denied
// (docs/secretd.md, "Ops and roles").
const (
	// RoleAdmin manages credentials and lists leases (-admin-users).
	RoleAdmin rpc.Role = "admin"
	// RoleStager stages, looks up, lists and revokes leases
	// (-stager-users: supervisord's user).
	RoleStager rpc.Role = "stager"
	// RoleConsumer consumes leases, the only op that returns a value
	// (-consumer-users: egressd's user).
	RoleConsumer rpc.Role = "consumer"
)

// Lease TTL bounds and default, in milliseconds (LeaseStageRequest.TTLMS;
// outside the bounds is lease.invalid_ttl).
const (
	DefaultTTLMS = 10 * 60 * 1000      // 10 minutes: the TTL of a stage that gives none
	MinTTLMS     = 1000                // 1 second
	MaxTTLMS     = 24 * 60 * 60 * 1000 // 24 hours
)

// MaxValueLen is the largest credential value, in bytes (64 KiB).
const MaxValueLen = 64 << 10

// MaxHandleLen is the largest handle, in bytes. secretd's handles are 40
// bytes (an 8-byte boot epoch and 32 random bytes); a longer one is
// lease.invalid_handle.
const MaxHandleLen = 64

// MaxOwnerLen is the longest owner id, in bytes.
const MaxOwnerLen = 64

// ValidOwner reports whether s is an owner id: 1 to MaxOwnerLen bytes of
// [a-z0-9-] (the invocation id's syntax). egressd's bundles use the same
// syntax.
func ValidOwner(s string) bool {
	if len(s) == 0 || len(s) > MaxOwnerLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// TargetSpec is one target a credential may be injected at: `header:<Name>`
// (with Template, e.g. "Bearer {}", `{}` exactly once, and Overwrite),
// `query:<param>`, `path:<name>`, `body:<RFC 6901 pointer>`, or one half of
// an HTTP Basic credential (RFC 7617): `basic:password` or `basic:user`
// (with BasicUser for `basic:password`).
type TargetSpec struct {
	// BasicUser fixes the user-id that egressd sends with a
	// `basic:password` credential, whatever user the agent sent; "" = the
	// user the agent sent passes unchanged. At most MaxBasicUserLen bytes
	// of UTF-8 without ':' or a control character (RFC 7617 §2); set on
	// any other target it is credential.invalid. Not secret: it is listed
	// with the credential's metadata.
	BasicUser string `msgpack:"basic_user"`
	// Overwrite, on a header target only, lets egressd replace a header
	// of that name the agent sent; false = such a request is refused
	// (egress.injection_conflict). Set on another target it is
	// credential.invalid.
	Overwrite bool `msgpack:"overwrite"`
	// Target is where the value goes: `header:<Name>` (an RFC 9110
	// token), `query:<param>`, `path:<name>` (a `{name}` path segment),
	// `body:<RFC 6901 pointer>` (non-empty, printable ASCII),
	// `basic:password` or `basic:user`; at most 256 bytes, prefix
	// included, and unique within a credential. Anything else is
	// credential.invalid (docs/secretd.md, "Targets").
	Target string `msgpack:"target"`
	// Template, on a header target only, is the header value with `{}`
	// (exactly once) standing for the credential, e.g. "Bearer {}":
	// printable ASCII, at most 256 bytes; "" = "{}" (secretd stores the
	// default). Set on another target it is credential.invalid.
	Template string `msgpack:"template"`
}

// Basic targets: the two halves of an `Authorization: Basic` credential
// (RFC 7617) that a credential's value may take.
const (
	// TargetBasicPassword: the value is the password (UTF-8 without a
	// control character); TargetSpec.BasicUser may fix the user-id.
	TargetBasicPassword = "basic:password"
	// TargetBasicUser: the value is the user-id (UTF-8 without ':' or a
	// control character, since the server splits at the first ':').
	TargetBasicUser = "basic:user"
)

// MaxBasicUserLen is the longest TargetSpec.BasicUser, in bytes.
const MaxBasicUserLen = 256

// CredentialPutRequest stores or replaces a credential (admin). Value is
// the raw material; it is never returned by any op but lease.consume.
type CredentialPutRequest struct {
	// Destinations are the origins a lease may send the value to: 1 to
	// 32 origins (lib/netguard: https, or http to a literal loopback
	// host), stored canonical, sorted and deduplicated; else
	// credential.invalid.
	Destinations []string `msgpack:"destinations"`
	// Name is the credential's name, [a-z0-9][a-z0-9._-]{0,63}; else
	// credential.invalid. A name that exists is replaced (its Version
	// grows by one), unless it came from $CREDENTIALS_DIRECTORY
	// (credential.read_only).
	Name string `msgpack:"name"`
	// Targets are where a lease may inject the value: 1 to 32, unique by
	// Target, stored sorted by Target; else credential.invalid.
	Targets []TargetSpec `msgpack:"targets"`
	// Value is the raw secret, 1..MaxValueLen bytes (else
	// credential.invalid); with a basic target it must also be a valid
	// Basic half (TargetBasicPassword, TargetBasicUser).
	Value []byte `msgpack:"value"`
}

// CredentialPutResponse reports the stored version.
type CredentialPutResponse struct {
	CreatedAt int64  `msgpack:"created_at"` // Unix ms of the first put; kept across replaces
	Name      string `msgpack:"name"`       // the request's Name
	UpdatedAt int64  `msgpack:"updated_at"` // Unix ms of this put
	Version   uint64 `msgpack:"version"`    // 1 on first put, +1 on each replace
}

// CredentialDeleteRequest deletes a stored credential (admin). Leases
// already staged from it stay valid until consumed, revoked or expired.
type CredentialDeleteRequest struct {
	// Name is the credential to delete: credential.not_found when there
	// is none, credential.read_only when it came from
	// $CREDENTIALS_DIRECTORY.
	Name string `msgpack:"name"`
}

// CredentialMeta describes a credential without its value.
type CredentialMeta struct {
	CreatedAt    int64        `msgpack:"created_at"`   // Unix ms of the first put (systemd: the file's mtime)
	Destinations []string     `msgpack:"destinations"` // canonical origins, sorted and unique
	Name         string       `msgpack:"name"`         // [a-z0-9][a-z0-9._-]{0,63}
	Source       string       `msgpack:"source"`       // "store" (credential.put) or "systemd" ($CREDENTIALS_DIRECTORY, read-only)
	Targets      []TargetSpec `msgpack:"targets"`      // sorted by Target; header templates defaulted to "{}"
	UpdatedAt    int64        `msgpack:"updated_at"`   // Unix ms of the latest put (systemd: the file's mtime)
	Version      uint64       `msgpack:"version"`      // 1 on first put, +1 on each replace; always 1 for systemd
}

// CredentialListResponse lists every credential's metadata, sorted by name.
type CredentialListResponse struct {
	Credentials []CredentialMeta `msgpack:"credentials"` // sorted by Name; never a value
}

// LeaseStageRequest stages a one-shot lease (stager). Destination and
// Target may be omitted when the credential allows exactly one (else
// lease.ambiguous). The schema has no field for raw material: only stored
// credentials can be leased.
type LeaseStageRequest struct {
	// Credential names the stored credential to lease
	// (credential.not_found when there is none).
	Credential string `msgpack:"credential"`
	// Destination is the origin the value may go to, compared in
	// canonical form with the credential's Destinations
	// (lease.destination_not_allowed when not among them); "" = the
	// credential's only one (lease.ambiguous when it has several).
	Destination string `msgpack:"destination"`
	// Invocation is the invocation the lease is bound to, [a-z0-9-]{1,64}
	// (else invocation.invalid): only a consume for it may take the lease.
	Invocation string `msgpack:"invocation"`
	// Owner is the staging process's persistent owner id (ValidOwner:
	// [a-z0-9-]{1,64}; "" = none, as before the field existed; else
	// owner.invalid). secretd only records it: lease.list and
	// lease.revoke select by it, so a stager that restarts after a crash
	// finds and releases exactly the leases it staged (docs/secretd.md,
	// "Owners"). It is bookkeeping, not an access check: every stager may
	// name any owner.
	Owner string `msgpack:"owner"`
	// Placeholder asks for this placeholder instead of a fresh one ("" =
	// a fresh one, as before the field existed): a stager that
	// re-registers a running agent after egressd restarted stages its
	// leases under the placeholders already in the agent's environment.
	// It must be ValidPlaceholder (else request.invalid), and no live
	// (staged, unconsumed, unexpired) lease of another invocation may
	// hold it (else lease.placeholder_in_use); a live lease of the same
	// invocation may.
	Placeholder string `msgpack:"placeholder"`
	// Target is one of the credential's TargetSpec.Target
	// (lease.target_not_allowed when not among them); "" = the
	// credential's only one (lease.ambiguous when it has several).
	Target string `msgpack:"target"`
	// TTLMS is the lease's lifetime in milliseconds, counted on
	// secretd's monotonic clock from the stage: 0 = DefaultTTLMS, else
	// MinTTLMS..MaxTTLMS (lease.invalid_ttl).
	TTLMS int64 `msgpack:"ttl_ms"`
}

// PlaceholderPrefix starts every placeholder.
const PlaceholderPrefix = "hkp_"

// PlaceholderLen is a placeholder's length in bytes: PlaceholderPrefix and
// 32 lowercase unpadded base32 characters (20 random bytes).
const PlaceholderLen = len(PlaceholderPrefix) + 32

// ValidPlaceholder reports whether s is a placeholder as secretd makes
// them (docs/secretd.md, "The model"): "hkp_" followed by exactly 32
// characters of [a-z2-7] (the RFC 4648 base32 alphabet, lower case).
func ValidPlaceholder(s string) bool {
	if len(s) != PlaceholderLen || s[:len(PlaceholderPrefix)] != PlaceholderPrefix {
		return false
	}
	for i := len(PlaceholderPrefix); i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// LeaseStageResponse carries the opaque one-shot handle (for egressd) and
// the placeholder (safe for the agent's environment).
type LeaseStageResponse struct {
	ExpiresAt   int64  `msgpack:"expires_at"`  // Unix ms: the stage time plus the TTL
	Handle      []byte `msgpack:"handle"`      // at most MaxHandleLen bytes (40 today); opaque, one-shot, valid only in this secretd process
	Placeholder string `msgpack:"placeholder"` // PlaceholderLen bytes (ValidPlaceholder): the request's, or a fresh one
}

// LeaseConsumeRequest consumes handles, all or nothing (consumer).
type LeaseConsumeRequest struct {
	// Handles are the handles to consume, 0 to 256 (more is
	// request.invalid), each at most MaxHandleLen bytes. The first
	// failing one's code is the error's (lease.invalid_handle,
	// lease.stale_epoch, lease.duplicate_handle, lease.consumed,
	// lease.not_found, lease.expired, lease.wrong_invocation); its
	// message names every failing index, never a handle.
	Handles [][]byte `msgpack:"handles"`
	// Invocation is the invocation the leases were staged for,
	// [a-z0-9-]{1,64} (else invocation.invalid).
	Invocation string `msgpack:"invocation"`
}

// Lease is one consumed lease: the only place a raw value leaves secretd.
type Lease struct {
	// BasicUser is the target's fixed user-id (TargetSpec.BasicUser):
	// only with Target `basic:password`; "" = the agent's user passes.
	BasicUser   string `msgpack:"basic_user"`
	Credential  string `msgpack:"credential"`  // the leased credential's name
	Destination string `msgpack:"destination"` // the canonical origin the value may go to, and nowhere else
	Handle      []byte `msgpack:"handle"`      // the handle as given, so the consumer can match the answer to it
	Overwrite   bool   `msgpack:"overwrite"`   // header targets only: replace a header of that name the agent sent
	Placeholder string `msgpack:"placeholder"` // the placeholder the agent holds for this value (ValidPlaceholder)
	Target      string `msgpack:"target"`      // where to inject the value (TargetSpec.Target)
	Template    string `msgpack:"template"`    // header targets only: the header value, `{}` standing for Value; "" elsewhere
	// Value is the credential's raw value, 1..MaxValueLen bytes: the
	// only field of any answer that carries it. secretd zeroes its copy
	// once the answer is encoded; the consumer must not log it.
	Value []byte `msgpack:"value"`
}

// LeaseConsumeResponse holds the leases in the order the handles were given.
type LeaseConsumeResponse struct {
	Leases []Lease `msgpack:"leases"` // one per handle, in the request's order
}

// LeaseLookupRequest asks for a lease's metadata without consuming it.
type LeaseLookupRequest struct {
	// Handle is a handle from lease.stage. Errors: lease.invalid_handle,
	// lease.stale_epoch, lease.consumed, lease.not_found, lease.expired.
	Handle []byte `msgpack:"handle"`
}

// LeaseMeta describes a staged lease; never a value or a handle.
type LeaseMeta struct {
	Credential  string `msgpack:"credential"`  // the leased credential's name
	Destination string `msgpack:"destination"` // the canonical origin the lease allows
	ExpiresAt   int64  `msgpack:"expires_at"`  // Unix ms
	// HandleFP identifies the handle in logs and audit records without
	// revealing it: the first 12 hex characters of HMAC-SHA256(boot key,
	// handle).
	HandleFP    string `msgpack:"handle_fp"`
	Invocation  string `msgpack:"invocation"`  // the invocation the lease is bound to
	Owner       string `msgpack:"owner"`       // the stage's owner id; "" when it named none
	Placeholder string `msgpack:"placeholder"` // the lease's placeholder (not a secret)
	StagedAt    int64  `msgpack:"staged_at"`   // Unix ms
	StagerUID   uint32 `msgpack:"stager_uid"`  // the staging peer's uid (SO_PEERCRED, unix(7))
	Target      string `msgpack:"target"`      // the target the lease allows (TargetSpec.Target)
}

// LeaseRevokeRequest revokes every unconsumed lease of an invocation, or,
// when Owner is set, only those staged with that owner id (another
// owner's leases of the same invocation are left alone). Errors:
// invocation.invalid, owner.invalid.
type LeaseRevokeRequest struct {
	Invocation string `msgpack:"invocation"` // required: [a-z0-9-]{1,64}
	Owner      string `msgpack:"owner"`      // "" = every owner; else ValidOwner
}

// LeaseRevokeResponse counts the leases revoked.
type LeaseRevokeResponse struct {
	Revoked int `msgpack:"revoked"` // leases removed, values zeroed; 0 when none matched
}

// LeaseListRequest lists staged leases, of one invocation and of one
// owner id when set ("" = any). Errors: invocation.invalid, owner.invalid.
type LeaseListRequest struct {
	Invocation string `msgpack:"invocation"` // "" = every invocation; else [a-z0-9-]{1,64}
	Owner      string `msgpack:"owner"`      // "" = every owner; else ValidOwner
}

// LeaseListResponse lists leases sorted by invocation, then staged time.
type LeaseListResponse struct {
	Leases []LeaseMeta `msgpack:"leases"` // unexpired, unconsumed leases only
}
