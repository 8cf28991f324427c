package bundle

import (
	"context"
	"crypto/sha256"
	"regexp"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"hostkit.dev/cmd/egressd/internal/policy"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/netguard"
	"hostkit.dev/lib/redact"
	"hostkit.dev/lib/wire"
)

// Consumer consumes leases at secretd (secretdapi.Client in production).
type Consumer interface {
	LeaseConsume(ctx context.Context, invocation string, handles [][]byte) (*secretdapi.LeaseConsumeResponse, error)
}

// Registry holds every bundle. Create with NewRegistry.
type Registry struct {
	consumer Consumer
	scrub    *redact.Scrubber

	mu      sync.Mutex
	bundles map[string]*Bundle
	pending map[string]bool
	held    map[[32]byte]int        // SHA-256 of each held value → how many credentials hold it
	lens    map[int]int             // length of each held value → how many credentials hold one
	places  map[string]string       // placeholder → invocation, for every held credential
	dests   map[netguard.Origin]int // credential destination → how many held credentials have it

	// heldLens is lens's keys and the shortest of them, published under
	// mu on every change: Holds answers most strings (whose length no held
	// value has), and ContainsFold most short ones, without hashing or
	// locking.
	heldLens atomic.Pointer[heldLengths]
}

// heldLengths is a snapshot of the lengths of the held values, and of
// their credentials' destinations.
type heldLengths struct {
	lens  map[int]bool
	min   int // the shortest; 0 when nothing is held
	max   int // the longest; 0 when nothing is held
	dests map[netguard.Origin]bool
}

// NewRegistry returns an empty registry that consumes leases through c and
// registers every held value with s (the daemon's scrubber, so logs, audit
// records, errors and responses never carry one).
func NewRegistry(c Consumer, s *redact.Scrubber) *Registry {
	return &Registry{consumer: c, scrub: s, bundles: map[string]*Bundle{}, pending: map[string]bool{}, held: map[[32]byte]int{}, lens: map[int]int{}, places: map[string]string{},
		dests: map[netguard.Origin]int{}}
}

var (
	invocationRE = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
	tokenRE      = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
)

// ValidInvocation reports whether s is an invocation id: [a-z0-9-]{1,64}.
func ValidInvocation(s string) bool { return invocationRE.MatchString(s) }

// Register validates req, consumes its handles from secretd all or
// nothing, and stores the bundle. Errors: bundle.invalid, bundle.exists,
// bundle.consume_failed (nothing is kept; values already received are
// zeroed).
func (r *Registry) Register(ctx context.Context, req *egressdapi.BundleRegisterRequest) (*Bundle, error) {
	pol, err := checkRequest(req)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.bundles[req.Invocation] != nil || r.pending[req.Invocation] {
		r.mu.Unlock()
		return nil, wire.Errorf(egressdapi.CodeBundleExists, "invocation %s already has a bundle", req.Invocation)
	}
	r.pending[req.Invocation] = true
	r.mu.Unlock()
	defer func() { r.mu.Lock(); delete(r.pending, req.Invocation); r.mu.Unlock() }()

	creds, err := r.consume(ctx, req.Invocation, req.Handles)
	if err != nil {
		return nil, err
	}
	b := &Bundle{Invocation: req.Invocation, Owner: req.Owner, RegisteredAt: time.Now(), policy: pol, token: []byte(req.ProxyToken), creds: creds, gone: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	// A stager may choose placeholders (a re-registration keeps the ones
	// in the agent's environment); secretd refuses one that another
	// invocation's staged lease holds, and this refuses one that another
	// invocation's bundle holds, so a placeholder always names one
	// invocation.
	for _, c := range creds {
		if inv, ok := r.places[c.Placeholder]; ok && inv != req.Invocation {
			zeroCreds(creds)
			return nil, wire.Errorf(egressdapi.CodeBundleConsumeFailed, "a placeholder of the leases is held by another invocation's bundle; nothing is kept")
		}
	}
	for _, c := range creds {
		c.unregister = r.scrub.Register(c.value.Bytes())
		r.held[sha256.Sum256(c.value.Bytes())]++
		r.lens[len(c.value.Bytes())]++
		r.places[c.Placeholder] = req.Invocation
		r.dests[c.Destination]++
	}
	r.publishLens()
	r.bundles[req.Invocation] = b
	return b, nil
}

func checkRequest(req *egressdapi.BundleRegisterRequest) (policy.Policy, error) {
	if !ValidInvocation(req.Invocation) {
		return policy.Policy{}, wire.Errorf(egressdapi.CodeBundleInvalid, "invocation must match [a-z0-9-]{1,64}")
	}
	if req.Owner != "" && !secretdapi.ValidOwner(req.Owner) {
		return policy.Policy{}, wire.Errorf(egressdapi.CodeBundleInvalid, "owner must match [a-z0-9-]{1,64}")
	}
	if !tokenRE.MatchString(req.ProxyToken) {
		return policy.Policy{}, wire.Errorf(egressdapi.CodeBundleInvalid, "proxy_token must be 43 characters of base64url")
	}
	if len(req.Handles) > egressdapi.MaxHandles {
		return policy.Policy{}, wire.Errorf(egressdapi.CodeBundleInvalid, "more than %d handles", egressdapi.MaxHandles)
	}
	for i, h := range req.Handles {
		if len(h) == 0 || len(h) > secretdapi.MaxHandleLen {
			return policy.Policy{}, wire.Errorf(egressdapi.CodeBundleInvalid, "handle %d is empty or longer than %d bytes", i, secretdapi.MaxHandleLen)
		}
		if slices.ContainsFunc(req.Handles[:i], func(o []byte) bool { return string(o) == string(h) }) {
			return policy.Policy{}, wire.Errorf(egressdapi.CodeBundleInvalid, "handle %d is given twice", i)
		}
	}
	return policy.Compile(req.Policy)
}

// Get returns invocation's bundle. Errors: bundle.unknown_invocation.
func (r *Registry) Get(invocation string) (*Bundle, error) {
	r.mu.Lock()
	b := r.bundles[invocation]
	r.mu.Unlock()
	if b == nil {
		return nil, wire.Errorf(egressdapi.CodeBundleUnknown, "invocation has no bundle")
	}
	return b, nil
}

// Drop removes invocation's bundle and zeroes its values once requests
// using them finish. Errors: bundle.unknown_invocation.
func (r *Registry) Drop(invocation string) error { return r.DropOwned(invocation, "") }

// DropOwned is Drop of a bundle registered with owner id owner ("" =
// whatever its owner): the owner is checked and the bundle removed in one
// critical section, so another owner's bundle is never dropped. Errors:
// bundle.unknown_invocation, bundle.owner_mismatch (nothing dropped).
func (r *Registry) DropOwned(invocation, owner string) error {
	r.mu.Lock()
	b := r.bundles[invocation]
	if b != nil && owner != "" && b.Owner != owner {
		r.mu.Unlock()
		return wire.Errorf(egressdapi.CodeBundleOwnerMismatch, "invocation %s has a bundle of another owner; nothing was dropped", invocation)
	}
	delete(r.bundles, invocation)
	if b != nil {
		for _, c := range b.creds {
			k := sha256.Sum256(c.value.Bytes())
			if r.held[k]--; r.held[k] <= 0 {
				delete(r.held, k)
			}
			if n := len(c.value.Bytes()); r.lens[n] <= 1 {
				delete(r.lens, n)
			} else {
				r.lens[n]--
			}
			delete(r.places, c.Placeholder)
			if r.dests[c.Destination] <= 1 {
				delete(r.dests, c.Destination)
			} else {
				r.dests[c.Destination]--
			}
		}
		r.publishLens()
	}
	r.mu.Unlock()
	if b == nil {
		return wire.Errorf(egressdapi.CodeBundleUnknown, "invocation has no bundle")
	}
	b.zero()
	return nil
}

// DropAll drops every bundle (shutdown).
func (r *Registry) DropAll() {
	r.mu.Lock()
	names := make([]string, 0, len(r.bundles))
	for n := range r.bundles {
		names = append(names, n)
	}
	r.mu.Unlock()
	for _, n := range names {
		_ = r.Drop(n)
	}
}

// Holds reports whether v equals the raw value of any credential held by
// egressd, for any invocation (compared by SHA-256).
func (r *Registry) Holds(v []byte) bool {
	if l := r.heldLens.Load(); l == nil || !l.lens[len(v)] {
		return false
	}
	k := sha256.Sum256(v)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[k] > 0
}

// HoldsString is Holds for a string: a string whose length no held value
// has is answered without a copy.
func (r *Registry) HoldsString(v string) bool {
	if l := r.heldLens.Load(); l == nil || !l.lens[len(v)] {
		return false
	}
	return r.Holds([]byte(v))
}

// publishLens publishes the lengths of the held values; r.mu is held.
func (r *Registry) publishLens() {
	h := &heldLengths{lens: make(map[int]bool, len(r.lens)), dests: make(map[netguard.Origin]bool, len(r.dests))}
	for o := range r.dests {
		h.dests[o] = true
	}
	for n := range r.lens {
		h.lens[n] = true
		if h.min == 0 || n < h.min {
			h.min = n
		}
		h.max = max(h.max, n)
	}
	r.heldLens.Store(h)
}

// MaxHeld returns the length in bytes of the longest value held now
// (0: none): a text longer than that equals none of them.
func (r *Registry) MaxHeld() int {
	if l := r.heldLens.Load(); l != nil {
		return l.max
	}
	return 0
}

// IsDestination reports whether o (canonical) is the destination of a
// credential egressd holds, for any invocation: the one kind of origin
// where a held value can have been placed, stored and echoed back.
func (r *Registry) IsDestination(o netguard.Origin) bool {
	l := r.heldLens.Load()
	return l != nil && l.dests[o]
}

// Scrubber returns the scrubber every held value is registered with.
func (r *Registry) Scrubber() *redact.Scrubber { return r.scrub }

// Stats returns accounting for invocation, or for every bundle when it is
// "", sorted by invocation. Errors: bundle.unknown_invocation.
func (r *Registry) Stats(invocation string) ([]egressdapi.InvocationStats, error) {
	if invocation != "" {
		b, err := r.Get(invocation)
		if err != nil {
			return nil, err
		}
		return []egressdapi.InvocationStats{b.Stats()}, nil
	}
	r.mu.Lock()
	out := make([]egressdapi.InvocationStats, 0, len(r.bundles))
	for _, b := range r.bundles {
		out = append(out, b.Stats())
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Invocation < out[j].Invocation })
	return out, nil
}

// List describes the bundles of invocation and of owner (each only when
// not ""), sorted by invocation: never a token, handle, placeholder or
// value. Epoch is left for the caller (it is the process's).
func (r *Registry) List(invocation, owner string) []egressdapi.BundleInfo {
	r.mu.Lock()
	out := make([]egressdapi.BundleInfo, 0, len(r.bundles))
	for _, b := range r.bundles {
		if (invocation == "" || b.Invocation == invocation) && (owner == "" || b.Owner == owner) {
			out = append(out, egressdapi.BundleInfo{Credentialed: b.HasCredentials(), Invocation: b.Invocation, Owner: b.Owner,
				RegisteredAt: b.RegisteredAt.UnixMilli()})
		}
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Invocation < out[j].Invocation })
	return out
}

// Counts returns the number of bundles and of credentials they hold.
func (r *Registry) Counts() (bundles, credentials int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bundles {
		credentials += len(b.creds)
	}
	return len(r.bundles), credentials
}

// ContainsFold reports whether s contains the raw value of any credential
// held by egressd, for any invocation, ignoring ASCII case (for text whose
// case was changed on the way, such as canonicalized header names). It
// compares in place: no copy of a value is made.
func (r *Registry) ContainsFold(s []byte) bool {
	if l := r.heldLens.Load(); l == nil || l.min == 0 || len(s) < l.min {
		return false // nothing held, or nothing held fits in s
	}
	r.mu.Lock()
	bs := make([]*Bundle, 0, len(r.bundles))
	for _, b := range r.bundles {
		bs = append(bs, b)
	}
	r.mu.Unlock()
	found := false
	for _, b := range bs {
		_ = b.Use(func(creds []*Credential) error {
			for _, c := range creds {
				if v := c.Value(); len(v) > 0 && indexFold(s, v) {
					found = true
				}
			}
			return nil
		})
		if found {
			return true
		}
	}
	return false
}

// indexFold reports whether needle occurs in hay, ignoring ASCII case.
func indexFold(hay, needle []byte) bool {
	lower := func(c byte) byte {
		if 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	for i := 0; i+len(needle) <= len(hay); i++ {
		j := 0
		for j < len(needle) && lower(hay[i+j]) == lower(needle[j]) {
			j++
		}
		if j == len(needle) {
			return true
		}
	}
	return false
}
