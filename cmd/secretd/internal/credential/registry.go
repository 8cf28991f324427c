package credential

import (
	"slices"
	"strings"
	"sync"
	"time"

	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/wire"
)

// Credential is one credential: metadata and its value.
type Credential struct {
	Meta  secretdapi.CredentialMeta // validated metadata, never the value
	Value *secmem.Buf               // the value in locked memory; Free zeroes it
}

// Persister stores credentials that came over the socket (the store).
type Persister interface {
	// Write durably stores meta and value, replacing any earlier version.
	Write(meta *secretdapi.CredentialMeta, value []byte) error
	// Remove durably deletes the named credential; a missing one is no error.
	Remove(name string) error
}

// Registry is the set of credentials secretd can lease from. It is safe
// for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	creds map[string]*Credential
	store Persister
	alloc *secmem.Allocator
	now   func() time.Time
}

// NewRegistry returns an empty Registry persisting through store.
func NewRegistry(store Persister, alloc *secmem.Allocator, now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	return &Registry{creds: map[string]*Credential{}, store: store, alloc: alloc, now: now}
}

// Add inserts already-loaded credentials (from the store or systemd). A
// systemd credential replaces a stored one of the same name; the names
// replaced are returned so the caller can log them. The registry owns the
// values from now on.
func (r *Registry) Add(cs ...Credential) (shadowed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range cs {
		c := cs[i]
		if old, ok := r.creds[c.Meta.Name]; ok {
			if old.Meta.Source == SourceSystemd && c.Meta.Source != SourceSystemd {
				shadowed = append(shadowed, c.Meta.Name)
				c.Value.Free()
				continue
			}
			if c.Meta.Source == SourceSystemd && old.Meta.Source != SourceSystemd {
				shadowed = append(shadowed, c.Meta.Name)
			}
			old.Value.Free()
		}
		r.creds[c.Meta.Name] = &c
	}
	return shadowed
}

// Put validates req and stores it durably, then in memory. Version starts
// at 1 and grows by one on each replace; CreatedAt is kept. Errors:
// credential.invalid, credential.read_only (a systemd credential), or an
// internal error from the store (its message never holds the value).
func (r *Registry) Put(req *secretdapi.CredentialPutRequest) (secretdapi.CredentialMeta, error) {
	if !ValidName(req.Name) {
		return secretdapi.CredentialMeta{}, invalid("name must match [a-z0-9][a-z0-9._-]{0,63}")
	}
	if err := CheckValue(req.Value); err != nil {
		return secretdapi.CredentialMeta{}, err
	}
	dests, err := CanonicalDestinations(req.Destinations)
	if err != nil {
		return secretdapi.CredentialMeta{}, err
	}
	targets, err := CheckTargets(req.Targets)
	if err != nil {
		return secretdapi.CredentialMeta{}, err
	}
	if err := CheckBasicValue(targets, req.Value); err != nil {
		return secretdapi.CredentialMeta{}, err
	}
	buf, err := r.alloc.Copy(req.Value)
	if err != nil {
		return secretdapi.CredentialMeta{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now().UnixMilli()
	meta := secretdapi.CredentialMeta{CreatedAt: now, Destinations: dests, Name: req.Name,
		Source: SourceStore, Targets: targets, UpdatedAt: now, Version: 1}
	old, exists := r.creds[req.Name]
	if exists {
		if old.Meta.Source == SourceSystemd {
			buf.Free()
			return secretdapi.CredentialMeta{}, wire.Errorf(secretdapi.CodeCredentialReadOnly, "credential %q comes from $CREDENTIALS_DIRECTORY and cannot be changed over the socket", req.Name)
		}
		meta.CreatedAt, meta.Version = old.Meta.CreatedAt, old.Meta.Version+1
	}
	if err := r.store.Write(&meta, buf.Bytes()); err != nil {
		buf.Free()
		return secretdapi.CredentialMeta{}, err
	}
	if exists {
		old.Value.Free()
	}
	r.creds[req.Name] = &Credential{Meta: meta, Value: buf}
	return meta, nil
}

// Delete removes a stored credential durably and zeroes its value. Errors:
// credential.not_found, credential.read_only, or an internal store error.
func (r *Registry) Delete(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.creds[name]
	if !ok {
		return wire.Errorf(secretdapi.CodeCredentialNotFound, "no credential named %q", truncate(name))
	}
	if c.Meta.Source == SourceSystemd {
		return wire.Errorf(secretdapi.CodeCredentialReadOnly, "credential %q comes from $CREDENTIALS_DIRECTORY and cannot be deleted over the socket", name)
	}
	if err := r.store.Remove(name); err != nil {
		return err
	}
	c.Value.Free()
	delete(r.creds, name)
	return nil
}

// List returns every credential's metadata, sorted by name.
func (r *Registry) List() []secretdapi.CredentialMeta {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]secretdapi.CredentialMeta, 0, len(r.creds))
	for _, c := range r.creds {
		out = append(out, c.Meta)
	}
	slices.SortFunc(out, func(a, b secretdapi.CredentialMeta) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Len returns the number of credentials.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.creds)
}

// With runs fn with the named credential's metadata and value under the
// registry's read lock; fn must copy what it keeps and must not retain
// value. Errors: credential.not_found, or fn's error.
func (r *Registry) With(name string, fn func(meta *secretdapi.CredentialMeta, value []byte) error) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.creds[name]
	if !ok {
		return wire.Errorf(secretdapi.CodeCredentialNotFound, "no credential named %q", truncate(name))
	}
	return fn(&c.Meta, c.Value.Bytes())
}

// Close zeroes every value.
func (r *Registry) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n, c := range r.creds {
		c.Value.Free()
		delete(r.creds, n)
	}
}

// truncate bounds a caller-supplied name echoed in a message.
func truncate(s string) string {
	if len(s) > MaxNameLen {
		return s[:MaxNameLen] + "..."
	}
	return s
}
