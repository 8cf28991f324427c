// Package secretdapi is secretd's wire API (DESIGN.md, "Main-flow schemas"):
// op names, roles, request and response bodies, error codes and a typed
// client. Struct fields are declared in bytewise order of their msgpack
// keys, as the canonical encoding requires (wire.CheckSchema tests it).
package secretdapi

import "hostkit.dev/lib/rpc"

// Op names.
const (
	OpCredentialPut    = "credential.put"
	OpCredentialDelete = "credential.delete"
	OpCredentialList   = "credential.list"
	OpLeaseStage       = "lease.stage"
	OpLeaseConsume     = "lease.consume"
	OpLeaseLookup      = "lease.lookup"
	OpLeaseRevoke      = "lease.revoke"
	OpLeaseList        = "lease.list"
)

// Roles (DESIGN.md's role table).
const (
	RoleAdmin    rpc.Role = "admin"
	RoleStager   rpc.Role = "stager"
	RoleConsumer rpc.Role = "consumer"
)

// Lease TTL bounds and default, in milliseconds.
const (
	DefaultTTLMS = 10 * 60 * 1000
	MinTTLMS     = 1000
	MaxTTLMS     = 24 * 60 * 60 * 1000
)

// MaxValueLen is the largest credential value, in bytes (64 KiB).
const MaxValueLen = 64 << 10

// MaxHandleLen is the largest handle, in bytes.
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
	Overwrite bool   `msgpack:"overwrite"` // header targets, native injection: replace an existing header (else refuse)
	Target    string `msgpack:"target"`
	Template  string `msgpack:"template"` // header targets only; "" = "{}"
}

// Basic targets: the two halves of an `Authorization: Basic` credential
// (RFC 7617) that a credential's value may take.
const (
	TargetBasicPassword = "basic:password"
	TargetBasicUser     = "basic:user"
)

// MaxBasicUserLen is the longest TargetSpec.BasicUser, in bytes.
const MaxBasicUserLen = 256

// CredentialPutRequest stores or replaces a credential (admin). Value is
// the raw material; it is never returned by any op but lease.consume.
type CredentialPutRequest struct {
	Destinations []string     `msgpack:"destinations"` // canonical origins (lib/netguard)
	Name         string       `msgpack:"name"`         // [a-z0-9][a-z0-9._-]{0,63}
	Targets      []TargetSpec `msgpack:"targets"`
	Value        []byte       `msgpack:"value"` // 1..MaxValueLen bytes
}

// CredentialPutResponse reports the stored version.
type CredentialPutResponse struct {
	CreatedAt int64  `msgpack:"created_at"` // Unix ms
	Name      string `msgpack:"name"`
	UpdatedAt int64  `msgpack:"updated_at"` // Unix ms
	Version   uint64 `msgpack:"version"`    // 1 on first put, +1 on each replace
}

// CredentialDeleteRequest deletes a stored credential (admin). Leases
// already staged from it stay valid until consumed, revoked or expired.
type CredentialDeleteRequest struct {
	Name string `msgpack:"name"`
}

// CredentialMeta describes a credential without its value.
type CredentialMeta struct {
	CreatedAt    int64        `msgpack:"created_at"`
	Destinations []string     `msgpack:"destinations"`
	Name         string       `msgpack:"name"`
	Source       string       `msgpack:"source"` // "store" or "systemd"
	Targets      []TargetSpec `msgpack:"targets"`
	UpdatedAt    int64        `msgpack:"updated_at"`
	Version      uint64       `msgpack:"version"`
}

// CredentialListResponse lists every credential's metadata, sorted by name.
type CredentialListResponse struct {
	Credentials []CredentialMeta `msgpack:"credentials"`
}

// LeaseStageRequest stages a one-shot lease (stager). Destination and
// Target may be omitted when the credential allows exactly one (else
// lease.ambiguous). The schema has no field for raw material: only stored
// credentials can be leased.
type LeaseStageRequest struct {
	Credential  string `msgpack:"credential"`
	Destination string `msgpack:"destination"`
	Invocation  string `msgpack:"invocation"` // [a-z0-9-]{1,64}
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
	Target      string `msgpack:"target"`
	TTLMS       int64  `msgpack:"ttl_ms"` // 0 = DefaultTTLMS; MinTTLMS..MaxTTLMS
}

// PlaceholderPrefix starts every placeholder.
const PlaceholderPrefix = "hkp_"

// PlaceholderLen is a placeholder's length in bytes: PlaceholderPrefix and
// 32 lowercase unpadded base32 characters (20 random bytes).
const PlaceholderLen = len(PlaceholderPrefix) + 32

// ValidPlaceholder reports whether s is a placeholder as secretd makes
// them (the placeholder grammar, DESIGN.md "Placeholder"):
// "hkp_" followed by exactly 32 characters of [a-z2-7].
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
	ExpiresAt   int64  `msgpack:"expires_at"` // Unix ms
	Handle      []byte `msgpack:"handle"`     // at most MaxHandleLen bytes; opaque
	Placeholder string `msgpack:"placeholder"`
}

// LeaseConsumeRequest consumes handles, all or nothing (consumer).
type LeaseConsumeRequest struct {
	Handles    [][]byte `msgpack:"handles"`
	Invocation string   `msgpack:"invocation"`
}

// Lease is one consumed lease: the only place a raw value leaves secretd.
type Lease struct {
	// BasicUser is the target's fixed user-id (TargetSpec.BasicUser):
	// only with Target `basic:password`; "" = the agent's user passes.
	BasicUser   string `msgpack:"basic_user"`
	Credential  string `msgpack:"credential"`
	Destination string `msgpack:"destination"`
	Handle      []byte `msgpack:"handle"`
	Overwrite   bool   `msgpack:"overwrite"`
	Placeholder string `msgpack:"placeholder"`
	Target      string `msgpack:"target"`
	Template    string `msgpack:"template"` // header targets only
	Value       []byte `msgpack:"value"`
}

// LeaseConsumeResponse holds the leases in the order the handles were given.
type LeaseConsumeResponse struct {
	Leases []Lease `msgpack:"leases"`
}

// LeaseLookupRequest asks for a lease's metadata without consuming it.
type LeaseLookupRequest struct {
	Handle []byte `msgpack:"handle"`
}

// LeaseMeta describes a staged lease; never a value or a handle.
type LeaseMeta struct {
	Credential  string `msgpack:"credential"`
	Destination string `msgpack:"destination"`
	ExpiresAt   int64  `msgpack:"expires_at"`
	HandleFP    string `msgpack:"handle_fp"` // truncated HMAC fingerprint of the handle
	Invocation  string `msgpack:"invocation"`
	Owner       string `msgpack:"owner"` // the stage's owner id; "" when it named none
	Placeholder string `msgpack:"placeholder"`
	StagedAt    int64  `msgpack:"staged_at"`
	StagerUID   uint32 `msgpack:"stager_uid"`
	Target      string `msgpack:"target"`
}

// LeaseRevokeRequest revokes every unconsumed lease of an invocation, or,
// when Owner is set, only those staged with that owner id (another
// owner's leases of the same invocation are left alone). Errors:
// invocation.invalid, owner.invalid.
type LeaseRevokeRequest struct {
	Invocation string `msgpack:"invocation"`
	Owner      string `msgpack:"owner"` // "" = every owner; else ValidOwner
}

// LeaseRevokeResponse counts the leases revoked.
type LeaseRevokeResponse struct {
	Revoked int `msgpack:"revoked"`
}

// LeaseListRequest lists staged leases, of one invocation and of one
// owner id when set ("" = any). Errors: invocation.invalid, owner.invalid.
type LeaseListRequest struct {
	Invocation string `msgpack:"invocation"`
	Owner      string `msgpack:"owner"`
}

// LeaseListResponse lists leases sorted by invocation, then staged time.
type LeaseListResponse struct {
	Leases []LeaseMeta `msgpack:"leases"`
}
