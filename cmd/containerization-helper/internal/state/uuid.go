package state

import (
	"crypto/rand"
	"encoding/hex"
)

// NewUUID returns a random (version 4, RFC 9562) UUID in the canonical
// lowercase 8-4-4-4-12 form hostkit uses for ids (docs/design.md,
// "Identifiers and schemas").
func NewUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// ValidUUID reports whether s is a UUID in canonical lowercase 8-4-4-4-12
// form (any version; docs/design.md, "Identifiers and schemas").
func ValidUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}
