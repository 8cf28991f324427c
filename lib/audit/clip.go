package audit

import (
	"strconv"
	"strings"
)

// Clip bounds a caller-supplied string for an audit field: s itself when it
// is at most max bytes, else its first max bytes (cut back to valid UTF-8)
// followed by "...(+N bytes)", N being what was left out. A client may
// send a name, a method or a target as long as its request allows; a
// record keeps a bounded, recognisable prefix.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	kept := strings.ToValidUTF8(s[:max], "")
	return kept + "...(+" + strconv.Itoa(len(s)-len(kept)) + " bytes)"
}
