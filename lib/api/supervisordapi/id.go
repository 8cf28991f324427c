package supervisordapi

import (
	"crypto/rand"
	"fmt"
	"strings"

	"hostkit.dev/lib/wire"
)

// CanonicalID returns id as a canonical lowercase 8-4-4-4-12 UUID (input in
// another case is lowercased). Errors: instance.invalid_id.
func CanonicalID(id string) (string, error) {
	id = strings.ToLower(id)
	if len(id) != 36 {
		return "", wire.Errorf(CodeInstanceInvalidID, "instance id must be a UUID in 8-4-4-4-12 form")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", wire.Errorf(CodeInstanceInvalidID, "instance id must be a UUID in 8-4-4-4-12 form")
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return "", wire.Errorf(CodeInstanceInvalidID, "instance id must be a UUID in 8-4-4-4-12 form")
			}
		}
	}
	return id, nil
}

// NewID returns a random (version 4) UUID in canonical form.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Hex16 returns the first 16 hex digits of a canonical id, hyphens removed
// (the holder socket's name).
func Hex16(id string) string { return strings.ReplaceAll(id, "-", "")[:16] }

// WatchAgent returns the watch-agent id of a canonical instance id:
// host-<first 8 hex>.
func WatchAgent(id string) string { return "host-" + id[:8] }
