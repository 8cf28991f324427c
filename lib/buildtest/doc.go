// Package buildtest builds the binaries that tests run as real child
// processes, at most once for each content: every TestMain of a
// `go test work` run (separate test processes, two at a time or more)
// asks Binary for the same daemons, and each is linked once and then
// reused until a source it is built from changes.
//
// A binary lives in its cache directory (by default
// os.UserCacheDir()/hostkit-test-bin) under <key>/<name>. The key is a
// hash of what the go command itself compiled for the binary — the build
// ID of every package it links, which covers every source, embedded file,
// build tag, cgo setting and compiler version — plus the build flags and
// the go environment that reaches only the linker. A change anywhere in
// the binary's dependencies gives a new key, so two worktrees, or two
// commits of one, never share a stale binary; identical inputs share one.
//
// An exclusive flock(2) on <key>.lock serialises the processes that want
// one key: the first builds into a temporary name and renames it into
// place, the others wait and then reuse it. Entries unused for longer
// than MaxAge are removed by the next Binary call; nothing is written
// outside the cache directory but the go command's own temporary files.
//
// The cache directory is private to the user (under $HOME), so a test
// that runs a binary as another uid, or needs binaries side by side,
// links them into a directory of its own with Link.
package buildtest
