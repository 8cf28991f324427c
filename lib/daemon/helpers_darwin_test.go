package daemon

import (
	"fmt"
	"os"
)

// becomeSubreaper is a no-op: macOS has no child subreaper.
func becomeSubreaper() error { return nil }

// childHarden is Linux-only (PR_GET_DUMPABLE).
func childHarden() int {
	fmt.Fprintln(os.Stderr, "harden child: Linux only")
	return 1
}
