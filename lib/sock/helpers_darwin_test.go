package sock

// becomeSubreaper is a no-op on macOS, where launchd reaps orphans.
func becomeSubreaper() error { return nil }
