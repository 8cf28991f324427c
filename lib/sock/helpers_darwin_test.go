package sock

import "errors"

// becomeSubreaper is a no-op on macOS, where launchd reaps orphans.
func becomeSubreaper() error { return nil }

// denyChown has no macOS counterpart (no seccomp); the tests that need it
// are Linux-only.
func denyChown() error { return errors.New("denyChown: seccomp is Linux-only") }
