// Package peerauth is the helper's second check on every connection, after
// the role check (docs/design.md, "Peers and roles"): the SHA-256 of the
// peer's executable, read through /proc/<pid>/exe, must be on an
// allowlist, and a peer whose binary was replaced or deleted since it
// started is refused. It also watches the helper's own binary (SelfCheck).
//
// Identity of a peer's executable is the open file behind
// /proc/<pid>/exe, not its path: hashes are cached by (device, inode,
// size, mtime, ctime) of that file (ctime because an owner can set mtime
// back after editing a binary between runs, but any write or utimes(2)
// moves ctime), and the pid is re-verified (its start time
// in /proc/<pid>/stat, before and after the read) so a pid recycled while
// the helper looked cannot pass with another process's binary.
//
// References: proc(5) (/proc/pid/exe, /proc/pid/stat field 22
// starttime), unix(7) (SO_PEERCRED), execve(2) (ETXTBSY: a running
// binary cannot be opened for writing, so a "replaced" binary is a new
// inode at the old path).
package peerauth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"hostkit.dev/lib/sock"
	"hostkit.dev/lib/wire"
)

// DefaultNeighbours are the executables next to the helper's own that
// form the allowlist when none is configured: the admin's client and
// supervisord (docs/design.md, "Peers and roles").
var DefaultNeighbours = []string{"hostctl", "supervisord"}

// MaxExeBytes caps how much of an executable is hashed (1 GiB); a bigger
// one is refused.
const MaxExeBytes = 1 << 30

// cacheMax bounds the hash cache; it is cleared when full.
const cacheMax = 256

// Reasons a peer is refused (log and audit field "reason"; never sent to
// the peer, which gets peer.denied).
const (
	ReasonNotAllowed = "exe_not_allowed" // the executable's hash is not on the allowlist
	ReasonDeleted    = "exe_deleted"     // the binary the peer runs was deleted (or renamed over)
	ReasonReplaced   = "exe_replaced"    // the path the peer was started from now holds another file
	ReasonPidChanged = "pid_changed"     // the pid's process changed while it was checked
	ReasonUnreadable = "exe_unreadable"  // /proc/<pid> could not be read (the peer exited?)
	ReasonTooLarge   = "exe_too_large"
)

// Config configures an Authenticator.
type Config struct {
	// AllowPaths are executables whose SHA-256 is allowed; each is hashed
	// once, in New (a missing or unreadable one is an error).
	AllowPaths []string
	// AllowSHA256 are allowed digests: 64 hex digits each.
	AllowSHA256 []string
	// Self is the helper's own executable path; when AllowPaths and
	// AllowSHA256 are both empty, the DefaultNeighbours found next to it
	// are allowed. "" = os.Executable().
	Self string
	// Logger receives one "peer.auth" line per refusal; required.
	Logger *slog.Logger
	// OnDenied, when set, is called for each refusal with the peer and
	// the reason (for the audit log).
	OnDenied func(p sock.Peer, reason string, exe string)
}

// Authenticator checks peers' executables. Safe for concurrent use.
type Authenticator struct {
	allow    map[[32]byte]string // digest → where it came from (a path, or "sha256")
	log      *slog.Logger
	onDenied func(sock.Peer, string, string)

	mu    sync.Mutex
	cache map[fileKey][32]byte
}

// fileKey identifies one version of a file: what a stat says of it. A
// running binary cannot be written (ETXTBSY), but one may be edited
// between runs and its mtime set back (utimes(2)); that moves ctime,
// which no unprivileged call can set, so ctime is part of the key.
type fileKey struct {
	dev, ino uint64
	size     int64
	mtimeNS  int64
	ctimeNS  int64
}

// New builds an Authenticator. Errors: an AllowPaths entry that cannot be
// hashed, an AllowSHA256 entry that is not 64 hex digits.
func New(cfg Config) (*Authenticator, error) {
	if cfg.Logger == nil {
		return nil, errors.New("peerauth.New: Logger is required")
	}
	a := &Authenticator{allow: map[[32]byte]string{}, log: cfg.Logger, onDenied: cfg.OnDenied, cache: map[fileKey][32]byte{}}
	for _, h := range cfg.AllowSHA256 {
		b, err := hex.DecodeString(strings.TrimPrefix(strings.ToLower(strings.TrimSpace(h)), "sha256:"))
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("peerauth: -allow-exe-sha256 %q is not 64 hex digits", h)
		}
		a.allow[[32]byte(b)] = "sha256"
	}
	paths := slices.Clone(cfg.AllowPaths)
	explicit := len(paths) > 0 || len(cfg.AllowSHA256) > 0
	if !explicit {
		self := cfg.Self
		if self == "" {
			var err error
			if self, err = os.Executable(); err != nil {
				return nil, fmt.Errorf("peerauth: own executable: %w", err)
			}
		}
		for _, n := range DefaultNeighbours {
			p := filepath.Join(filepath.Dir(self), n)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				paths = append(paths, p)
			}
		}
	}
	for _, p := range paths {
		sum, err := hashPath(p)
		if err != nil {
			return nil, fmt.Errorf("peerauth: -allow-exe %s: %w", p, err)
		}
		a.allow[sum] = p
	}
	if len(a.allow) == 0 {
		a.log.Warn("peer.auth_allowlist_empty", slog.String("why", "no -allow-exe, no -allow-exe-sha256, and no hostctl or supervisord next to the helper: every peer is refused"))
	}
	return a, nil
}

// Allowed returns the allowlist as sorted "sha256:<hex> <source>" lines,
// for the start-up log.
func (a *Authenticator) Allowed() []string {
	out := make([]string, 0, len(a.allow))
	for d, src := range a.allow {
		out = append(out, "sha256:"+hex.EncodeToString(d[:])+" "+src)
	}
	slices.Sort(out)
	return out
}

// Authenticate checks p's executable (rpc.Config.Authenticate). It returns
// nil for an allowed peer and peer.denied otherwise; the reason is logged
// and passed to OnDenied, never sent.
func (a *Authenticator) Authenticate(p sock.Peer) error {
	exe, sum, reason := a.inspect(int(p.PID))
	if reason == "" {
		if _, ok := a.allow[sum]; ok {
			return nil
		}
		reason = ReasonNotAllowed
	}
	attrs := []any{slog.String("reason", reason), slog.Uint64("peer_uid", uint64(p.UID)), slog.Int64("peer_pid", int64(p.PID)), slog.String("exe", exe)}
	if sum != ([32]byte{}) {
		attrs = append(attrs, slog.String("exe_sha256", hex.EncodeToString(sum[:])))
	}
	a.log.Warn("peer.auth_denied", attrs...)
	if a.onDenied != nil {
		a.onDenied(p, reason, exe)
	}
	return wire.Errorf(wire.CodePeerDenied, "peer is not allowed")
}

// lookup returns the cached digest for k.
func (a *Authenticator) lookup(k fileKey) ([32]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d, ok := a.cache[k]
	return d, ok
}

func (a *Authenticator) store(k fileKey, d [32]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) >= cacheMax {
		clear(a.cache)
	}
	a.cache[k] = d
}
