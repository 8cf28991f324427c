package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// NewEpoch returns a process start's epoch: 16 lowercase hex characters from
// 8 bytes of crypto/rand (docs/design.md, "Identifiers and schemas"). It
// fails rather than fall back to weaker randomness.
func NewEpoch() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("daemon.NewEpoch: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
