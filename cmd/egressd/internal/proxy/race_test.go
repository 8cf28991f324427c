//go:build race

package proxy

// raceEnabled reports whether the race detector is on: sync.Pool then
// drops a share of what is put back, on purpose, so allocation counts
// of pooled paths mean nothing.
const raceEnabled = true
