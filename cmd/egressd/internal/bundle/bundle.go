// Package bundle is egressd's invocation registry (docs/egressd.md, "Ops"):
// one Bundle per registered invocation, holding its egress policy, its
// proxy token and the credentials consumed from secretd. The consume
// answer is the only description of each credential; values live in
// memory only and are zeroed when the bundle is dropped.
package bundle

import (
	"crypto/subtle"
	"sync"
	"sync/atomic"
	"time"

	"hostkit.dev/cmd/egressd/internal/inject"
	"hostkit.dev/cmd/egressd/internal/policy"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// Credential is one consumed lease. Its value is reachable only through
// Bundle.Use, so a drop cannot zero it while a request reads it.
type Credential struct {
	Name        string          // the credential's name at secretd
	Destination netguard.Origin // canonical; the only origin the value may go to
	Target      inject.Target   // the only position the value may take
	Template    string          // header targets: "{}" placed once; "" = "{}"
	Overwrite   bool            // header targets: replace an existing header
	BasicUser   string          // basic:password: the user-id sent whatever the agent sent ("" = the agent's)
	Placeholder string          // hkp_...; safe to show
	placed      string          // header targets: Template rendered with Placeholder (PlacedHeader)
	value       redact.Secret
	unregister  func()
}

// PlacedHeader returns, for a header target, the value its header holds
// when the placeholder sits there: Template rendered with Placeholder
// (rendered once, when the credential was consumed). Errors: those of
// inject.Render.
func (c *Credential) PlacedHeader() (string, error) {
	if c.placed != "" {
		return c.placed, nil
	}
	return inject.Render(c.Template, []byte(c.Placeholder))
}

// Value returns the raw value. Call it only inside Bundle.Use; do not keep
// or modify the slice.
func (c *Credential) Value() []byte { return c.value.Bytes() }

// Bundle is one invocation's registration.
type Bundle struct {
	Invocation   string    // [a-z0-9-]{1,64}: the registry's key
	Owner        string    // the registering stager's owner id ("" = none)
	RegisteredAt time.Time // when Register stored it
	policy       policy.Policy
	token        []byte
	creds        []*Credential

	mu      sync.RWMutex
	dropped bool
	gone    chan struct{} // closed by zero; nil for a bundle that is never dropped

	egressBytes atomic.Uint64
	ingress     atomic.Uint64 // response body bytes passed on
	requests    atomic.Uint64
	refused     atomic.Uint64
}

// Use runs fn with the bundle's credentials while holding them against a
// concurrent drop. Errors: bundle.unknown_invocation after a drop, or fn's.
func (b *Bundle) Use(fn func(creds []*Credential) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.dropped {
		return wire.Errorf(egressdapi.CodeBundleUnknown, "invocation %s has no bundle", b.Invocation)
	}
	return fn(b.creds)
}

// Allows reports whether the invocation may send method to origin o: a
// credential destination (any method) or a policy rule.
func (b *Bundle) Allows(o netguard.Origin, method string) bool {
	for _, c := range b.creds {
		if c.Destination == o {
			return true
		}
	}
	return b.policy.Allows(o, method)
}

// CredentialHost reports whether some credential's destination has host
// h (any scheme or port).
func (b *Bundle) CredentialHost(h string) bool {
	for _, c := range b.creds {
		if c.Destination.Host == h {
			return true
		}
	}
	return false
}

// HasCredentials reports whether the bundle holds at least one credential.
func (b *Bundle) HasCredentials() bool { return len(b.creds) > 0 }

// CheckToken reports whether token is the bundle's proxy token, in
// constant time.
func (b *Bundle) CheckToken(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), b.token) == 1
}

// AddEgress adds n outbound request bytes to the invocation's counter and
// counts one request sent.
func (b *Bundle) AddEgress(n uint64) {
	b.egressBytes.Add(n)
	b.requests.Add(1)
}

// AddIngress adds n response body bytes passed on to the client.
func (b *Bundle) AddIngress(n uint64) { b.ingress.Add(n) }

// AddRefused counts one refused request.
func (b *Bundle) AddRefused() { b.refused.Add(1) }

// Stats returns the bundle's accounting.
func (b *Bundle) Stats() egressdapi.InvocationStats {
	return egressdapi.InvocationStats{
		Invocation:          b.Invocation,
		NetworkEgressBytes:  b.egressBytes.Load(),
		NetworkIngressBytes: b.ingress.Load(),
		Refused:             b.refused.Load(),
		Requests:            b.requests.Load(),
	}
}

// Dropped returns a channel that is closed when the bundle is dropped
// (bundle.drop or shutdown), so that a connection that outlives a request
// (an opaque tunnel) ends with it; nil (never ready) for a bundle outside
// the registry, such as the anonymous one.
func (b *Bundle) Dropped() <-chan struct{} { return b.gone }

// zero drops every value: it waits for requests inside Use, then zeroes
// and unregisters each value from the scrubber.
func (b *Bundle) zero() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropped = true
	if b.gone != nil {
		close(b.gone)
	}
	zeroCreds(b.creds)
	clear(b.token)
}

func zeroCreds(creds []*Credential) {
	for _, c := range creds {
		c.value.Zero()
		if c.unregister != nil {
			c.unregister()
		}
	}
}
