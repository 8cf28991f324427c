// Package lease is secretd's lease table: invocation-scoped, one-shot,
// memory-only leases on credentials (docs/secretd.md, "The model";
// docs/design.md, "Never a raw secret to an agent").
//
// A handle is EpochLen bytes of the process's boot epoch followed by
// RandLen bytes from crypto/rand (never a fallback: staging fails closed).
// The table keeps only HMAC-SHA256(boot key, handle), so a memory read of
// the table does not yield usable handles; a handle whose epoch is not this
// process's is lease.stale_epoch. The placeholder, "hkp_" + 32 lowercase
// unpadded base32 characters (20 random bytes), is independent of the
// handle and safe to put in an agent's environment.
package lease

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"

	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/wire"
)

// Handle layout, in bytes.
const (
	EpochLen  = 8
	RandLen   = 32
	HandleLen = EpochLen + RandLen // 40 ≤ secretdapi.MaxHandleLen
)

// PlaceholderPrefix starts every placeholder.
const PlaceholderPrefix = "hkp_"

// placeholderRand is the number of random bytes in a placeholder (160 bits,
// 32 base32 characters).
const placeholderRand = 20

// FPLen is the length of a handle fingerprint in hex characters.
const FPLen = 12

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// MAC is the keyed digest under which a handle is stored.
type MAC [sha256.Size]byte

// FP returns the handle's fingerprint for logs and audit: the first FPLen
// hex characters of its MAC. It reveals nothing usable about the handle.
func (m MAC) FP() string { return hex.EncodeToString(m[:FPLen/2]) }

// keyring holds the per-boot epoch and HMAC key.
type keyring struct {
	epoch [EpochLen]byte
	key   [32]byte
}

func newKeyring(epoch [EpochLen]byte) (*keyring, error) {
	k := &keyring{epoch: epoch}
	if _, err := rand.Read(k.key[:]); err != nil {
		return nil, fmt.Errorf("lease: no randomness for the boot key: %w", err)
	}
	return k, nil
}

// mac returns HMAC-SHA256(key, h).
func (k *keyring) mac(h []byte) MAC {
	m := hmac.New(sha256.New, k.key[:])
	m.Write(h)
	var out MAC
	m.Sum(out[:0])
	return out
}

// newHandle returns a fresh handle and a placeholder. Errors (no
// randomness) are internal: the caller stages nothing.
func (k *keyring) newHandle() ([]byte, string, error) {
	var rnd [RandLen + placeholderRand]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, "", wire.Wrap(wire.CodeInternal, "no randomness for a handle", err)
	}
	h := make([]byte, 0, HandleLen)
	h = append(append(h, k.epoch[:]...), rnd[:RandLen]...)
	ph := PlaceholderPrefix + lowerB32(rnd[RandLen:])
	clear(rnd[:])
	return h, ph, nil
}

func lowerB32(b []byte) string {
	s := []byte(b32.EncodeToString(b))
	for i, c := range s {
		if c >= 'A' && c <= 'Z' {
			s[i] = c + ('a' - 'A')
		}
	}
	return string(s)
}

// check classifies a handle's shape: lease.invalid_handle for the wrong
// length, lease.stale_epoch for another process's epoch, else "" and its
// MAC.
func (k *keyring) check(h []byte) (MAC, string) {
	if len(h) != HandleLen {
		return k.mac(h), secretdapi.CodeLeaseInvalidHandle
	}
	if !bytes.Equal(h[:EpochLen], k.epoch[:]) {
		return k.mac(h), secretdapi.CodeLeaseStaleEpoch
	}
	return k.mac(h), ""
}
