package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"hostkit.dev/lib/api/secretdapi"
)

// FileOwner is the owner id's file in supervisord's state directory.
const FileOwner = "owner"

// OwnerPrefix starts every owner id supervisord makes ("sv-" and 32
// lowercase hex digits, 128 random bits).
const OwnerPrefix = "sv-"

// LoadOwner returns the supervisord's persistent owner id, kept in
// dir/owner: it is read when the file exists and made once otherwise,
// durably (temp file, fsync, link, fsync of dir), so every later start
// reads the same id. Leases and bundles carry it (docs/supervisord.md,
// "Egress"): losing it would orphan them, so a file that exists but does
// not hold a valid id ([a-z0-9-]{1,64}) is an error, never replaced.
func LoadOwner(dir string) (string, error) {
	path := filepath.Join(dir, FileOwner)
	if id, err := readOwner(path); !errors.Is(err, os.ErrNotExist) {
		return id, err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("store.LoadOwner: %w", err)
	}
	id := OwnerPrefix + hex.EncodeToString(b[:])
	f, err := os.CreateTemp(dir, "."+FileOwner+".tmp*")
	if err != nil {
		return "", fmt.Errorf("store.LoadOwner: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.WriteString(id + "\n")
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("store.LoadOwner: %w", err)
	}
	// link, not rename: it never replaces an id another start wrote.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return readOwner(path)
		}
		return "", fmt.Errorf("store.LoadOwner: %w", err)
	}
	if err := SyncAll(dir); err != nil {
		return "", err
	}
	return id, nil
}

func readOwner(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	id := strings.TrimSuffix(string(b), "\n")
	if !secretdapi.ValidOwner(id) {
		return "", fmt.Errorf("store.LoadOwner: %s does not hold an owner id ([a-z0-9-]{1,64}); it is kept, fix or remove it by hand", path)
	}
	return id, nil
}
