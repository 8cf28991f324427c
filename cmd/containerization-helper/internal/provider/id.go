package provider

import (
	"strings"

	"hostkit.dev/lib/wire"
)

// maxIDLen is the longest container id (one lead character plus 63).
const maxIDLen = 64

// ValidID reports whether id matches [a-z0-9][a-z0-9_.-]{0,63} and does
// not contain "..". The runtimes' own checks differ (crun 1.8 accepts
// "../evil" and would make a state directory outside its root), so the
// provider refuses anything else itself, before running a command.
func ValidID(id string) bool {
	if id == "" || len(id) > maxIDLen || strings.Contains(id, "..") {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// checkID returns CodeInvalidID unless ValidID(id); the message never
// echoes the id.
func checkID(id string) error {
	if !ValidID(id) {
		return wire.Errorf(CodeInvalidID, "container id must match [a-z0-9][a-z0-9_.-]{0,63} without \"..\"")
	}
	return nil
}
