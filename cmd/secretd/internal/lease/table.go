package lease

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"hostkit.dev/cmd/secretd/internal/secmem"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// Config configures a Table.
type Config struct {
	Epoch     [EpochLen]byte    // the process's boot epoch (daemon.NewEpoch, decoded)
	MaxLeases int               // live leases at most; default 10000
	Alloc     *secmem.Allocator // required
	Now       func() time.Time  // default time.Now (with its monotonic reading)
}

// Spec is what a stager asks for, already checked against the credential.
type Spec struct {
	Credential  string // the credential's name
	Destination string // the canonical origin the value may go to
	Target      string // where the value is injected (TargetSpec.Target)
	Template    string // header targets only
	Overwrite   bool   // header targets only
	BasicUser   string // basic:password only: the user-id egressd sends ("" = the agent's)
	Invocation  string // the invocation the lease is bound to
	Owner       string // the stager's owner id ("" = none): List and Revoke select by it
	// Placeholder is the placeholder the stager asked for
	// (secretdapi.ValidPlaceholder, checked by the caller); "" = a fresh
	// one.
	Placeholder string
	TTL         time.Duration // MinTTLMS..MaxTTLMS, checked by the caller
	Stager      sock.Peer     // the staging peer (audit, tombstones, stager_uid)
}

// entry is one staged lease.
type entry struct {
	spec      Spec
	mac       MAC
	ph        string
	value     *secmem.Buf
	stagedAt  time.Time // wall and monotonic
	expires   time.Time // stagedAt + TTL, compared on the monotonic clock
	expiresMS int64     // Unix ms, for answers
}

// tomb remembers a consumed handle until its lease would have expired, so
// a reuse is lease.consumed (and audited once, naming the stager).
type tomb struct {
	stager     sock.Peer
	consumer   sock.Peer
	consumedAt time.Time
	expires    time.Time
	reported   bool
}

// Table holds the leases of one process. It is safe for concurrent use;
// one mutex guards the maps, so a batch consume is a single critical
// section.
type Table struct {
	cfg    Config
	keys   *keyring
	mu     sync.Mutex
	leases map[MAC]*entry
	tombs  map[MAC]*tomb
	// tombQ lists tombstones in consumption order from tombHead on, for
	// eviction; entries already swept are skipped, and Sweep compacts it.
	tombQ    []MAC
	tombHead int
}

// New returns an empty table with a fresh boot key.
func New(cfg Config) (*Table, error) {
	if cfg.MaxLeases <= 0 {
		cfg.MaxLeases = 10000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	k, err := newKeyring(cfg.Epoch)
	if err != nil {
		return nil, err
	}
	return &Table{cfg: cfg, keys: k, leases: map[MAC]*entry{}, tombs: map[MAC]*tomb{}}, nil
}

// Staged is the answer to a stage.
type Staged struct {
	Handle      []byte // HandleLen bytes: the epoch, then random bytes
	Placeholder string // the lease's placeholder (the asked-for one, or fresh)
	ExpiresAt   int64  // Unix ms
	MAC         MAC    // the handle's keyed digest, under which the lease is stored
}

// Stage copies value into locked memory and stages a lease for spec,
// under spec.Placeholder when it is set. Errors: server.busy (MaxLeases
// reached), lease.placeholder_in_use (a live lease of another invocation
// holds spec.Placeholder), internal (no randomness or memory); nothing is
// staged on error.
func (t *Table) Stage(spec Spec, value []byte) (Staged, error) {
	h, ph, err := t.keys.newHandle()
	if err != nil {
		return Staged{}, err
	}
	if spec.Placeholder != "" {
		ph = spec.Placeholder
	}
	buf, err := t.cfg.Alloc.Copy(value)
	if err != nil {
		return Staged{}, wire.Wrap(wire.CodeInternal, "no memory for the lease", err)
	}
	now := t.cfg.Now()
	e := &entry{spec: spec, mac: t.keys.mac(h), ph: ph, value: buf, stagedAt: now, expires: now.Add(spec.TTL)}
	e.expiresMS = e.expires.UnixMilli()
	t.mu.Lock()
	var gone []*secmem.Buf
	if len(t.leases) >= t.cfg.MaxLeases {
		gone = t.dropExpired(now)
	}
	full := len(t.leases) >= t.cfg.MaxLeases
	// The check and the insert are one critical section, so two stages
	// of one placeholder for two invocations cannot both succeed.
	inUse := spec.Placeholder != "" && t.heldElsewhere(spec.Placeholder, spec.Invocation, now)
	if !full && !inUse {
		t.leases[e.mac] = e
	}
	t.mu.Unlock()
	for _, b := range gone {
		b.Free()
	}
	if inUse {
		buf.Free()
		return Staged{}, wire.Errorf(secretdapi.CodeLeasePlaceholderInUse, "another invocation's staged lease holds that placeholder")
	}
	if full {
		buf.Free()
		return Staged{}, &wire.Error{Code: wire.CodeServerBusy, Msg: "too many staged leases", Retry: wire.RetrySafe}
	}
	return Staged{Handle: h, Placeholder: ph, ExpiresAt: e.expiresMS, MAC: e.mac}, nil
}

func (e *entry) meta() secretdapi.LeaseMeta {
	return secretdapi.LeaseMeta{Credential: e.spec.Credential, Destination: e.spec.Destination, ExpiresAt: e.expiresMS,
		HandleFP: e.mac.FP(), Invocation: e.spec.Invocation, Owner: e.spec.Owner, Placeholder: e.ph, StagedAt: e.stagedAt.UnixMilli(),
		StagerUID: e.spec.Stager.UID, Target: e.spec.Target}
}

// Lookup returns a lease's metadata without consuming it. Errors:
// lease.invalid_handle, lease.stale_epoch, lease.consumed, lease.not_found,
// lease.expired (each with the handle's MAC for the audit record).
func (t *Table) Lookup(h []byte) (secretdapi.LeaseMeta, MAC, error) {
	mac, code := t.keys.check(h)
	if code != "" {
		return secretdapi.LeaseMeta{}, mac, handleErr(code, -1)
	}
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.tombs[mac]; ok {
		return secretdapi.LeaseMeta{}, mac, handleErr(secretdapi.CodeLeaseConsumed, -1)
	}
	e, ok := t.leases[mac]
	if !ok {
		return secretdapi.LeaseMeta{}, mac, handleErr(secretdapi.CodeLeaseNotFound, -1)
	}
	if !now.Before(e.expires) {
		return secretdapi.LeaseMeta{}, mac, handleErr(secretdapi.CodeLeaseExpired, -1)
	}
	return e.meta(), mac, nil
}

// Revoke removes every unconsumed lease of invocation, of owner only when
// it is not "", and zeroes their values. It returns the MACs revoked.
func (t *Table) Revoke(invocation, owner string) []MAC {
	t.mu.Lock()
	var gone []*entry
	for mac, e := range t.leases {
		if e.spec.Invocation == invocation && (owner == "" || e.spec.Owner == owner) {
			gone = append(gone, e)
			delete(t.leases, mac)
		}
	}
	t.mu.Unlock()
	macs := make([]MAC, 0, len(gone))
	for _, e := range gone {
		e.value.Free()
		macs = append(macs, e.mac)
	}
	return macs
}

// List returns the metadata of the live (unexpired) leases, of invocation
// and of owner only when each is not "", sorted by invocation, then
// staged time.
func (t *Table) List(invocation, owner string) []secretdapi.LeaseMeta {
	now := t.cfg.Now()
	t.mu.Lock()
	out := make([]secretdapi.LeaseMeta, 0, len(t.leases))
	for _, e := range t.leases {
		if (invocation == "" || e.spec.Invocation == invocation) && (owner == "" || e.spec.Owner == owner) && now.Before(e.expires) {
			out = append(out, e.meta())
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b secretdapi.LeaseMeta) int {
		return cmp.Or(cmp.Compare(a.Invocation, b.Invocation), cmp.Compare(a.StagedAt, b.StagedAt), cmp.Compare(a.HandleFP, b.HandleFP))
	})
	return out
}

// ExpiredGrace is how long an expired lease's metadata (not its value,
// which the sweeper zeroes at once) is kept, so a late consume or lookup
// gets lease.expired rather than lease.not_found.
const ExpiredGrace = time.Minute

// Sweep zeroes the values of expired leases, forgets leases expired for
// more than ExpiredGrace and tombstones past their lease's expiry, and
// reports how many values it zeroed and tombstones it dropped.
func (t *Table) Sweep() (zeroed, tombs int) {
	now := t.cfg.Now()
	var gone []*secmem.Buf
	t.mu.Lock()
	for mac, e := range t.leases {
		if now.Before(e.expires) {
			continue
		}
		if e.value != nil {
			gone = append(gone, e.value)
			e.value = nil
		}
		if now.Sub(e.expires) >= ExpiredGrace {
			delete(t.leases, mac)
		}
	}
	for mac, tb := range t.tombs {
		if !now.Before(tb.expires) {
			delete(t.tombs, mac)
			tombs++
		}
	}
	q := make([]MAC, 0, len(t.tombs))
	for _, mac := range t.tombQ[t.tombHead:] {
		if _, ok := t.tombs[mac]; ok {
			q = append(q, mac)
		}
	}
	t.tombQ, t.tombHead = q, 0
	t.mu.Unlock()
	for _, b := range gone {
		b.Free()
	}
	return len(gone), tombs
}

// Counts reports the number of live (unexpired) leases and of tombstones.
func (t *Table) Counts() (leases, tombs int) {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.leases {
		if now.Before(e.expires) {
			leases++
		}
	}
	return leases, len(t.tombs)
}

// heldElsewhere reports whether a live (unexpired, unconsumed) lease of
// an invocation other than invocation holds placeholder ph; t.mu is held.
// A linear scan: only stages that name a placeholder (re-registrations)
// pay it, and the table is bounded by MaxLeases.
func (t *Table) heldElsewhere(ph, invocation string, now time.Time) bool {
	for _, e := range t.leases {
		if e.ph == ph && e.spec.Invocation != invocation && now.Before(e.expires) {
			return true
		}
	}
	return false
}

// dropExpired forgets every expired lease (at MaxLeases, expired ones make
// room first). t.mu is held; the values are returned for freeing.
func (t *Table) dropExpired(now time.Time) []*secmem.Buf {
	var gone []*secmem.Buf
	for mac, e := range t.leases {
		if !now.Before(e.expires) {
			if e.value != nil {
				gone = append(gone, e.value)
			}
			delete(t.leases, mac)
		}
	}
	return gone
}

// Close zeroes every value and empties the table.
func (t *Table) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for mac, e := range t.leases {
		e.value.Free() // nil-safe: swept values are already gone
		delete(t.leases, mac)
	}
	clear(t.tombs)
	t.tombQ, t.tombHead = nil, 0
}
